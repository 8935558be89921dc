// The correctness stage: breadth before speed. Every shape x dtype (the mask is part of the
// shape) is checked against the fp64 reference with its own recorded seed, on the GPU when the
// target device and the CUDA check are here, else on the CPU interpreter (large problems run a
// deterministic sample of blocks, reported as such). On failure the smallest failing case is
// shrunk out and written as a reproducer folder; later stages then do not run.
#include <algorithm>
#include <filesystem>

#include "pilot/PilotRun.h"
#include "pilot/Repro.h"
#include "pilot/Shrink.h"

namespace tp::pilot {

namespace {

ReproCase repro_case(const PilotRun& r, const ops::Problem& p, const ops::Config& config,
                     uint64_t seed) {
  ReproCase c;
  c.problem = p;
  c.fault = r.spec.inject_fault;
  c.backend = r.check_backend;
  c.arch = r.spec.device;
  c.config = config;
  c.seed = seed;
  c.atol = r.spec.atol;
  c.rtol = r.spec.rtol;
  c.flop_budget = r.opt.cpu_flop_budget;
  return c;
}

std::string sampled_note(const ops::CheckResult& res) {
  if (res.blocks_run >= res.blocks_total) return "all " + std::to_string(res.blocks_total);
  return "sampled " + std::to_string(res.blocks_run) + "/" + std::to_string(res.blocks_total);
}

nlohmann::json case_json(const Case& c, const ops::CheckResult& res) {
  nlohmann::json j = ops::to_json(res);
  j["case"] = c.index;
  j["kind"] = c.representative() ? "representative" : "edge";
  j["mask"] = c.mask;
  if (c.representative()) j["weight"] = c.weight();
  j["blocks"] = sampled_note(res);
  return j;
}

} // namespace

void stage_correctness(PilotRun& r) {
  r.run_stage("correctness", [&](nlohmann::json& d) -> std::string {
    bool gpu = r.on_device && r.opt.backends.check_cuda;
    r.check_backend = gpu ? "cuda" : "cpu";
    d["backend"] = r.check_backend;
    if (!gpu) {
      d["backend_note"] =
          (r.on_device ? std::string("this build has no CUDA check") : r.no_device) +
          ": checked on the CPU interpreter; problems over " +
          std::to_string(static_cast<int64_t>(r.opt.cpu_flop_budget)) +
          " flops run a deterministic sample of blocks";
      d["flop_budget"] = r.opt.cpu_flop_budget;
    }
    d["spec_seed"] = r.spec.seed;
    if (!r.spec.inject_fault.empty())
      d["inject_fault"] = r.spec.inject_fault + " (test-only: the kernel is deliberately broken)";
    d["cases"] = nlohmann::json::array();
    int n = static_cast<int>(r.cases.size());
    for (const Case& c : r.cases) {
      r.progress.step(c.index + 1, n, c.label);
      ops::CheckResult res =
          run_case(repro_case(r, c.problem, r.config_for(c), c.seed), r.opt.backends);
      d["cases"].push_back(case_json(c, res));
      r.checks.push_back(res);
    }
    int failed = static_cast<int>(
        std::count_if(r.checks.begin(), r.checks.end(), [](auto& x) { return !x.passed; }));
    int sampled = static_cast<int>(std::count_if(
        r.checks.begin(), r.checks.end(), [](auto& x) { return x.blocks_run < x.blocks_total; }));
    d["summary"] = {{"cases", n}, {"failed", failed}, {"sampled", sampled}};
    if (failed == 0) return "passed";

    // Shrink the cheapest failing case: it shrinks fastest and is already the smallest.
    const ops::Operator& op = *r.op;
    const Case* worst = nullptr;
    for (const Case& c : r.cases)
      if (!r.checks[c.index].passed && (!worst || op.flops(c.problem) < op.flops(worst->problem)))
        worst = &c;
    d["shrunk_case"] = worst->label; // the cheapest failing case
    r.progress.stage("correctness: shrinking");
    int attempt = 0;
    ShrinkResult s = shrink_failure(
        op, worst->problem, r.checks[worst->index],
        [&](const ops::Problem& p) {
          r.progress.step(++attempt, r.opt.shrink_attempts, p.shape_str(), "attempt");
          ops::Config cfg = pinned_config(op, p, r.spec.device, r.spec.config);
          return run_case(repro_case(r, p, cfg, worst->seed), r.opt.backends);
        },
        r.opt.shrink_attempts);
    nlohmann::json shrink = {{"from", worst->problem.shape_str()},
                             {"to", s.problem.shape_str()},
                             {"attempts", s.attempts},
                             {"max_attempts", r.opt.shrink_attempts},
                             {"steps", s.steps}};
    // Absolute, so that the recorded command replays from any working directory.
    std::string dir = std::filesystem::absolute(r.final_dir + "/repro").lexically_normal().string();
    ReproCase rc = repro_case(r, s.problem, s.result.config, worst->seed);
    write_repro(r.write_dir + "/repro", rc, s.result, r.opt.backends, shrink, r.opt.tilepilot_exe,
                dir);
    d["shrink"] = shrink;
    d["repro"] = {{"dir", dir},
                  {"command", r.opt.tilepilot_exe + " repro " + dir},
                  {"failure", ops::to_json(s.result)}};
    return "failed";
  });
}

} // namespace tp::pilot
