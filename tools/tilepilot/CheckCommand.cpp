// `tilepilot check OP --shape k=v,... [--dtype] [--backend cpu|cuda] [--seed] [--config] [--json]`
#include <iostream>

#include "CliSupport.h"
#include "Commands.h"
#include "ops/Check.h"
#include "ops/MemoryCheck.h"
#include "pilot/ConfigCheck.h"
#include "runtime/Driver.h"
#include "tilepilot/runtime.h"

namespace tp::cli {

void add_check_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("check", "check an operator against its fp64 reference");
  struct Args {
    std::string op, shape, dtype = "bf16", backend = "cpu", config, seed = "0", atol, rtol;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("op", a->op, "operator (see `tilepilot ops`)")->required();
  cmd->add_option("--shape", a->shape, "problem, e.g. M=77,N=45,K=133")->required();
  cmd->add_option("--dtype", a->dtype, "bf16 | f16 | f32");
  cmd->add_option("--backend", a->backend, "cpu (interpreter) | cuda");
  cmd->add_option("--seed", a->seed, "input seed");
  cmd->add_option("--config", a->config, "knobs, e.g. bm=64,bn=64,bk=32,stages=2,threads=128");
  cmd->add_option("--atol", a->atol, "absolute tolerance (default: per dtype)");
  cmd->add_option("--rtol", a->rtol, "relative tolerance (default: per dtype)");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->callback([a, rc] {
    const ops::Operator& op = ops::find_operator(a->op);
    DType dt = parse_dtype_or_fail(a->dtype);
    ops::Problem p = op.parse(ops::parse_kv(a->shape, "--shape"), dt);
    ops::CheckOptions o;
    o.backend = check_backend(a->backend);
    o.arch = o.backend == "cpu" ? "cpu" : "sm_90a";
    o.seed = parse_seed(a->seed, "--seed");
    if (!a->atol.empty()) o.atol = parse_tolerance(a->atol, "--atol");
    if (!a->rtol.empty()) o.rtol = parse_tolerance(a->rtol, "--rtol");
    // Knobs the flag leaves out come from the default config for the backend's arch.
    if (!a->config.empty())
      o.config = ops::complete_config(op, p, o.arch, ops::parse_config(a->config));
    if (o.backend == "cuda") {
      // The GPU kernel must exist for this problem and config before anything is compiled,
      // and the problem must fit in the device's memory as well as the host's.
      ops::Config c = o.config.empty() ? op.default_config(p, o.arch) : o.config;
      if (std::string why = pilot::config_problem(op, p, o.arch, c); !why.empty())
        user_error() << "check: " << why;
      std::string no_gpu;
      auto dev = rt::device_info(rt::selected_device_ordinal(), &no_gpu);
      ops::require_memory(op, p, "check", dev ? static_cast<double>(dev->total_memory_bytes) : 0.0,
                          ops::intermediate_bytes(ops::checked_program(op, p, c)));
    }
    ops::CheckResult r = run_check(op, p, o);
    if (a->json) {
      std::cout << ops::to_json(r).dump() << "\n";
    } else {
      std::cout << (r.passed ? "PASS " : "FAIL ") << r.op << " " << r.problem.shape_str() << " "
                << dtype_name(p.dtype) << " backend=" << r.backend
                << " config=" << ops::config_str(r.config) << "\n  max_abs_err=" << r.max_abs_err
                << " rel_l2_err=" << r.rel_l2_err << " (atol=" << r.atol << ", rtol=" << r.rtol
                << ") checked " << r.checked << " elements in " << r.blocks_run << "/"
                << r.blocks_total << " blocks\n";
      if (!r.first_bad.empty()) std::cout << "  first mismatch: " << r.first_bad << "\n";
    }
    *rc = r.passed ? 0 : 1;
  });
}

} // namespace tp::cli
