// The tuner's hooks for the CUDA backend. compile runs on the tuner's worker threads and needs
// no GPU: it builds, lowers and compiles one config with NVRTC (through the kernel cache) and
// returns ptxas's resource report. check_correct and measure run on the tuner's calling thread
// and need a GPU of the target arch: the first measure of a candidate loads its module (a cache
// hit), then runs are timed with CUDA events, the L2 flushed before each (runtime/Timing.h);
// check_correct is the CUDA check against the fp64 reference (ops::check_cuda).
#pragma once
#include <string>

#include "autotune/Hooks.h"

namespace tp::autotune {

/// Hooks for (op, p) on `arch`. Without a GPU of that arch, measure and check_correct are empty
/// and why_no_measure says why; compile still works (a compile-only check). `op` must outlive
/// every compile the tuner starts (operators from ops::find_operator live for the process).
TuneHooks cuda_tune_hooks(const ops::Operator& op, const ops::Problem& p, const std::string& arch);

/// Makes cuda_tune_hooks the default factory (set_default_hooks) unless a factory is registered
/// already (a test's fakes, an embedding application's own). Called explicitly from main() and
/// pilot::default_backends(): a self-registering static initialiser in this static library
/// would be dropped by the linker.
void register_cuda_tune_hooks();

} // namespace tp::autotune
