// Commands whose implementations land with later layers register here until then.
#include "Commands.h"

namespace tp::cli {
void add_bench_command(CLI::App&, int*) {}
} // namespace tp::cli
