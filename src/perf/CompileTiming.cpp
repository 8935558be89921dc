// Cold and warm compile measurement through CudaKernel's phase timings.
#include "perf/CompileTiming.h"

#include <chrono>

#include "ops/CudaProgram.h"

namespace tp::perf {

CompileReport measure_compile(const ops::Operator& op, const ops::Problem& p, const ops::Config& c,
                              const std::string& arch,
                              const std::vector<cuda::DeviceTensor>& args) {
  ops::check_config(op, p, c, arch);
  CompileReport r;
  auto t0 = std::chrono::steady_clock::now();
  r.program = ops::checked_program(op, p, c);
  double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // Prime: NVRTC's library loaded, the cubin on disk and the module in this process.
  ops::CudaProgram(r.program, arch).prepare(args);

  ops::CudaProgram cold(r.program, arch, /*bypass_cache=*/true);
  cuda::CompileTimings ct = cold.prepare(args);
  r.cold_phases_ms = {{"build", build_ms},
                      {"passes+codegen", ct.passes * 1e3},
                      {"nvrtc", ct.nvrtc * 1e3},
                      {"module_load", ct.module_load * 1e3}};
  for (const auto& [_, ms] : r.cold_phases_ms)
    r.cold_ms += ms;
  r.cold_registers = ct.registers;

  ops::CudaProgram warm(r.program, arch);
  cuda::CompileTimings wt = warm.prepare(args);
  r.warm_phases_ms = {{"passes+codegen", wt.passes * 1e3}, {"lookup", wt.lookup * 1e3}};
  if (!wt.cache_hit) {
    r.warm_phases_ms.push_back({"nvrtc", wt.nvrtc * 1e3});
    r.warm_phases_ms.push_back({"module_load", wt.module_load * 1e3});
  }
  r.warm_ms = wt.total() * 1e3;
  r.warm_cache_hit = wt.cache_hit;
  return r;
}

} // namespace tp::perf
