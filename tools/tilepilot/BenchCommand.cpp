// `tilepilot bench OP --shape k=v,... [--dtype] [--config | --policy pinned --pinned FILE |
//  --policy adaptive [--budget-seconds N]] [--runs N] [--warmup N] [--seed N] [--backend cuda]
//  [--vs reference] [--json]`
//
// The config is --config, else the one the policy chooses (autotune/Policy.h: a pinned table, or
// the tuning database with a search on a miss), else the operator's default; the output says
// which and why.
// Ours and the framework reference (cuBLASLt; cuDNN, else the unfused GPU reference, said so)
// timed side by side in this process on the same inputs, L2 flushed before every timed run,
// median and IQR of each and their ratio; ours is checked against the fp64 reference first and
// its cold and warm compile are printed. Exit status: 0 measured; 1 ours failed its check (and
// was not timed); 2 bad input, or no GPU here ("bench needs a GPU (<reason>)").
#include <iostream>

#include "CliSupport.h"
#include "Commands.h"
#include "autotune/Policy.h"
#include "ops/MemoryCheck.h"
#include "perf/SideBySide.h"
#include "perf/SideBySideReport.h"
#include "pilot/ConfigCheck.h"
#include "runtime/Driver.h"
#include "tilepilot/runtime.h"

namespace tp::cli {

namespace {

struct Args {
  std::string op, shape, dtype = "bf16", config, backend = "cuda", vs = "reference";
  std::string policy, pinned;
  double budget = 60;
  int runs = 50, warmup = 10;
  std::string seed = "3";
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
  // An upper bound too: each side's runs are stored and timed one by one, so a mistyped count
  // (--runs 1000000000) would look like a hang rather than an error.
  constexpr int kMaxRuns = 100000;
  if (a.runs < 1 || a.runs > kMaxRuns)
    user_error() << "bench: --runs " << a.runs << " must be in [1, " << kMaxRuns
                 << "]; 50 (the default) gives a stable median";
  if (a.warmup < 0 || a.warmup > kMaxRuns)
    user_error() << "bench: --warmup " << a.warmup << " must be in [0, " << kMaxRuns << "]";
  // The policy is checked here too, and a pinned table loaded: a bad one is wrong everywhere.
  std::optional<autotune::Policy> policy;
  if (!a.policy.empty()) {
    if (!a.config.empty())
      user_error() << "bench: --config and --policy both choose the config; give one";
    policy.emplace();
    if (a.policy == "pinned") {
      if (a.pinned.empty())
        user_error() << "bench: --policy pinned needs --pinned FILE (a pinned table, e.g. from "
                        "`tilepilot tune --spec ... --pinned-out FILE`)";
      policy->kind = autotune::PolicyKind::pinned;
      policy->pinned = autotune::PinnedTable::load(a.pinned);
    } else if (a.policy == "adaptive") {
      if (!(a.budget > 0)) user_error() << "bench: --budget-seconds " << a.budget << " must be > 0";
      policy->kind = autotune::PolicyKind::adaptive;
      policy->tune.budget_seconds = a.budget;
      policy->tune.progress = autotune::TuneOptions::Progress::off;
    } else {
      user_error() << "bench: --policy '" << a.policy << "' is unknown; use pinned or adaptive";
    }
  }
  if (!a.pinned.empty() && a.policy != "pinned")
    user_error() << "bench: --pinned goes with --policy pinned";
  // The knobs' names and ranges before anything else; the rest once the GPU's arch is known.
  if (!a.config.empty()) ops::validate_knobs(op, ops::parse_config(a.config), "cpu");
  const uint64_t seed = parse_seed(a.seed, "--seed");

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
  ops::Config c = ops::complete_config(op, p, dev->arch, ops::parse_config(a.config));
  // Before any buffer is allocated or kernel compiled: a problem or config this GPU cannot run.
  ops::require_memory(op, p, "bench", static_cast<double>(dev->total_memory_bytes));
  if (pilot::arch_problem(dev->arch).empty())
    if (std::string why = pilot::config_problem(op, p, dev->arch, c); !why.empty())
      user_error() << "bench: " << why;
  // A program of several kernels also needs its intermediates on the device.
  if (double mid = ops::intermediate_bytes(ops::checked_program(op, p, c)); mid > 0)
    ops::require_memory(op, p, "bench", static_cast<double>(dev->total_memory_bytes), mid);
  std::optional<autotune::Choice> choice;
  if (policy) {
    choice = autotune::choose_config(*policy, op, p, *dev);
    c = choice->config;
    if (!a.json)
      std::cout << "config " << ops::config_str(c) << " (" << autotune::policy_name(policy->kind)
                << " policy, " << choice->source << ": " << choice->reason << ")\n";
  }
  perf::SideBySideOptions o;
  o.timing.runs = a.runs;
  o.timing.warmup = a.warmup;
  o.seed = seed;
  o.copy_bandwidth = true; // GB/s against the copy, for memory-bound operators and decode shapes
  perf::SideBySide s = perf::time_side_by_side(op, p, c, o);
  if (a.json) {
    nlohmann::json j = perf::to_json(s, p, o.timing);
    if (choice)
      j["config_choice"] = {{"policy", autotune::policy_name(policy->kind)},
                            {"source", choice->source},
                            {"reason", choice->reason}};
    std::cout << j.dump(2) << "\n";
  } else
    std::cout << perf::to_text(s, p, o.timing);
  *rc = s.ours ? 0 : 1;
}

} // namespace

void add_bench_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("bench", "time ours and the framework reference side by side");
  auto a = std::make_shared<Args>();
  cmd->add_option("op", a->op, "operator (see `tilepilot ops`)")->required();
  cmd->add_option("--shape", a->shape, "problem, e.g. M=4096,N=4096,K=4096")->required();
  cmd->add_option("--dtype", a->dtype, "bf16 | f16 (the vendor references run these)");
  cmd->add_option("--config", a->config, "knobs (default: the operator's for the GPU)");
  cmd->add_option("--policy", a->policy,
                  "choose the config by policy: pinned (a table, --pinned) or adaptive (the "
                  "tuning database; a search on a miss, stored for next time)");
  cmd->add_option("--pinned", a->pinned, "pinned table for --policy pinned (JSON file or folder)");
  cmd->add_option("--budget-seconds", a->budget,
                  "--policy adaptive: search budget on a database miss (default 60)");
  cmd->add_option("--runs", a->runs, "timed runs per side (default 50)");
  cmd->add_option("--warmup", a->warmup, "untimed runs first (default 10)");
  cmd->add_option("--seed", a->seed, "input seed");
  cmd->add_option("--backend", a->backend, "cuda (the only backend that is timed)");
  cmd->add_option("--vs", a->vs, "reference (cuBLASLt / cuDNN)");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->callback([a, rc] { run_bench(*a, rc); });
}

} // namespace tp::cli
