// `tilepilot bench OP --shape k=v,... [--dtype] [--config] [--runs N] [--warmup N] [--seed N]
//  [--backend cuda] [--vs reference] [--json]`
//
// Ours and the framework reference (cuBLASLt; cuDNN, else the unfused GPU reference, said so)
// timed side by side in this process on the same inputs, L2 flushed before every timed run,
// median and IQR of each and their ratio; ours is checked against the fp64 reference first and
// its cold and warm compile are printed. Exit status: 0 measured; 1 ours failed its check (and
// was not timed); 2 bad input, or no GPU here ("bench needs a GPU (<reason>)").
#include <iostream>

#include "CliSupport.h"
#include "Commands.h"
#include "perf/SideBySide.h"
#include "perf/SideBySideReport.h"
#include "runtime/Driver.h"
#include "tilepilot/runtime.h"

namespace tp::cli {

namespace {

struct Args {
  std::string op, shape, dtype = "bf16", config, backend = "cuda", vs = "reference";
  int runs = 50, warmup = 10;
  uint64_t seed = 3;
  bool json = false;
};

void run_bench(const Args& a, int* rc) {
  // Bad input is reported before the GPU is looked for: it is wrong on every machine.
  const ops::Operator& op = ops::find_operator(a.op);
  ops::Problem p = op.parse(ops::parse_kv(a.shape, "--shape"), parse_dtype_or_fail(a.dtype));
  if (a.backend != "cuda")
    user_error() << "bench: --backend '" << a.backend
                 << "' cannot be timed; bench measures the cuda backend (use --backend cuda, "
                    "or `tilepilot check --backend cpu` for the interpreter)";
  if (a.vs != "reference")
    user_error() << "bench: --vs '" << a.vs
                 << "' is unknown; ours is compared with the framework reference (--vs reference)";
  if (a.runs < 1) user_error() << "bench: --runs " << a.runs << " must be at least 1";
  if (a.warmup < 0) user_error() << "bench: --warmup " << a.warmup << " must not be negative";
  if (!a.config.empty()) op.validate(p, ops::parse_config(a.config));

  std::string why;
  std::optional<rt::DeviceInfo> dev = rt::device_info(rt::selected_device_ordinal(), &why);
  if (!dev) {
    std::string reason = "bench needs a GPU (" + why + ")";
    if (a.json) {
      nlohmann::json j = {{"op", op.name()},
                          {"shape", p.shape_str()},
                          {"dtype", dtype_name(p.dtype)},
                          {"status", "not_run"},
                          {"reason", "not run: " + reason}};
      std::cout << j.dump(2) << "\n";
    } else {
      std::cerr << "tilepilot: " << reason << "; without one, `tilepilot check " << op.name()
                << " --backend cpu` checks correctness and `tilepilot show " << op.name()
                << " --stage resources` compiles for sm_90a\n";
    }
    *rc = 2;
    return;
  }
  ops::Config c = a.config.empty() ? op.default_config(p, dev->arch) : ops::parse_config(a.config);
  perf::SideBySideOptions o;
  o.timing.runs = a.runs;
  o.timing.warmup = a.warmup;
  o.seed = a.seed;
  perf::SideBySide s = perf::time_side_by_side(op, p, c, o);
  if (a.json)
    std::cout << perf::to_json(s, p, o.timing).dump(2) << "\n";
  else
    std::cout << perf::to_text(s, p, o.timing);
  *rc = s.ours ? 0 : 1;
}

} // namespace

void add_bench_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("bench", "time ours and the framework reference side by side");
  auto a = std::make_shared<Args>();
  cmd->add_option("op", a->op, "operator: gemm | attention")->required();
  cmd->add_option("--shape", a->shape, "problem, e.g. M=4096,N=4096,K=4096")->required();
  cmd->add_option("--dtype", a->dtype, "bf16 | f16 (the vendor references run these)");
  cmd->add_option("--config", a->config, "knobs (default: the operator's for the GPU)");
  cmd->add_option("--runs", a->runs, "timed runs per side (default 50)");
  cmd->add_option("--warmup", a->warmup, "untimed runs first (default 10)");
  cmd->add_option("--seed", a->seed, "input seed");
  cmd->add_option("--backend", a->backend, "cuda (the only backend that is timed)");
  cmd->add_option("--vs", a->vs, "reference (cuBLASLt / cuDNN)");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->callback([a, rc] { run_bench(*a, rc); });
}

} // namespace tp::cli
