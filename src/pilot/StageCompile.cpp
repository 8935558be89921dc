// The compile stage, per distinct kernel program (cases whose programs print the same canonical
// IR share one compile; a program of several kernels compiles each of its steps): on the target
// device, cold compile by phase (cache bypassed) and warm compile (cache hit); without it,
// compile-only for the target arch (NVRTC time and resource usage), which needs no GPU. Either
// needs the CUDA backend's hook.
#include "ir/IRPrinter.h"
#include "pilot/PilotRun.h"
#include "release/Files.h"

namespace tp::pilot {

namespace {

struct DistinctKernel {
  std::string hash, name;
  const Case* first = nullptr;
  ops::Config config;
  ops::KernelProgram program;
  std::vector<int> cases;
};

std::vector<DistinctKernel> distinct_kernels(const PilotRun& r) {
  std::vector<DistinctKernel> out;
  std::map<std::string, size_t> seen;
  for (const Case& c : r.cases) {
    ops::Config cfg = r.config_for(c);
    ops::KernelProgram prog = ops::checked_program(*r.op, c.problem, cfg);
    std::string h = program_ir_hash(prog);
    std::string name;
    for (const ops::KernelStep& s : prog.steps)
      name += (name.empty() ? "" : "+") + s.kernel->name;
    auto [it, fresh] = seen.emplace(h, out.size());
    if (fresh) out.push_back({h, name, &c, cfg, std::move(prog), {}});
    out[it->second].cases.push_back(c.index);
  }
  return out;
}

nlohmann::json kernel_json(const DistinctKernel& k) {
  return {{"kernel", k.name},
          {"ir_hash", k.hash},
          {"config", ops::config_str(k.config)},
          {"cases", k.cases},
          {"example_case", k.first->label}};
}

} // namespace

std::string kernel_ir_hash(const Kernel& k) {
  return release::xxh64_hex(ir::to_string(k.node(), /*canonical=*/true));
}

std::string program_ir_hash(const ops::KernelProgram& prog) {
  if (prog.steps.size() == 1 && prog.intermediates.empty())
    return kernel_ir_hash(prog.steps[0].kernel);
  std::string text;
  for (const ops::KernelStep& s : prog.steps) {
    text += ir::to_string(s.kernel.node(), /*canonical=*/true) + "\nbound to";
    for (int b : s.args)
      text += " " + std::to_string(b);
    text += "\n";
  }
  // Sizes are bound at launch, as in a kernel's own hash: an intermediate's dtype and rank.
  for (const ops::ArgSpec& a : prog.intermediates)
    text += std::string("intermediate ") + dtype_name(a.dtype) + " rank " +
            std::to_string(a.shape.size()) + "\n";
  return release::xxh64_hex(text);
}

void stage_compile(PilotRun& r) {
  if (const StageRecord* c = r.stage("correctness"); !c || !c->passed()) {
    r.run_stage("compile", [](nlohmann::json&) -> std::string {
      return "not run: correctness did not pass (breadth before speed)";
    });
    return;
  }
  r.run_stage("compile", [&](nlohmann::json& d) -> std::string {
    if (!r.spec.wants("compile")) return "not run: compile is not in the spec's metrics";
    const Backends& b = r.opt.backends;
    bool timed = r.on_device && b.compile_timing;
    if (!timed && !b.compile_only) {
      std::string why = r.gpu_unavailable("compile_timing", bool(b.compile_timing));
      return why + "; compile-only checks need Backends::compile_only (the CUDA backend), "
                   "not in this build";
    }
    std::vector<DistinctKernel> ks = distinct_kernels(r);
    d["arch"] = r.spec.device;
    d["mode"] = timed ? "cold and warm compile on the device" : "compile-only (no device)";
    if (!timed) d["cold_warm"] = r.gpu_unavailable("compile_timing", bool(b.compile_timing));
    d["kernels"] = nlohmann::json::array();
    int i = 0;
    for (const DistinctKernel& k : ks) {
      r.progress.step(++i, static_cast<int>(ks.size()), k.name, "kernel");
      nlohmann::json j = kernel_json(k);
      if (timed) {
        CompileTiming t = b.compile_timing(*r.op, k.first->problem, k.config, r.spec.device);
        for (const auto& [phase, ms] : t.cold_phases_ms)
          j["cold_phases_ms"][phase] = ms;
        j["cold_ms"] = t.cold_ms;
        j["warm_ms"] = t.warm_ms;
      }
      if (b.compile_only && k.program.steps.size() == 1) {
        CompileOnlyResult c = b.compile_only(k.program.steps[0].kernel, r.spec.device);
        j["nvrtc_ms"] = c.nvrtc_ms;
        j["resources"] = c.resources;
        if (!c.nvrtc_log.empty()) j["nvrtc_log"] = c.nvrtc_log;
        r.compiled[k.hash] = std::move(c);
      } else if (b.compile_only) {
        // Each step on its own (its resources, its log), and the NVRTC time a call needs.
        double nvrtc_ms = 0;
        j["steps"] = nlohmann::json::array();
        for (const ops::KernelStep& s : k.program.steps) {
          CompileOnlyResult c = b.compile_only(s.kernel, r.spec.device);
          nlohmann::json sj = {
              {"kernel", s.kernel->name}, {"nvrtc_ms", c.nvrtc_ms}, {"resources", c.resources}};
          if (!c.nvrtc_log.empty()) sj["nvrtc_log"] = c.nvrtc_log;
          j["steps"].push_back(sj);
          nvrtc_ms += c.nvrtc_ms;
          r.compiled[kernel_ir_hash(s.kernel)] = std::move(c);
        }
        j["nvrtc_ms"] = nvrtc_ms;
      }
      d["kernels"].push_back(j);
    }
    return "passed";
  });
}

} // namespace tp::pilot
