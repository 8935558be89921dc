// Cold and warm compile of one operator's kernel program on the current GPU, by phase, summed
// over its steps (a call needs every one). Cold: the built kernels compiled with every cache
// bypassed (NVRTC runs, the module is loaded). Warm: the same built
// kernel prepared again, found in this process's module cache (what a running process pays for a
// kernel it has used before: lowering and the cache lookup; no NVRTC, no module load).
//
// The same Kernel objects are used throughout on purpose: generated CUDA names buffers by their
// builder ids, so a second build of one config gives different source text and cache key.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "compile/CudaKernel.h"
#include "ops/Operator.h"

namespace tp::perf {

struct CompileReport {
  /// build (the tile-language builder), passes+codegen (lowering and CUDA emission), nvrtc,
  /// module_load; in that order, milliseconds.
  std::vector<std::pair<std::string, double>> cold_phases_ms;
  double cold_ms = 0;
  /// Registers per thread in ptxas' report of the cold compile: a real compile always has one;
  /// -1 would mean NVRTC answered from a cache of its own and ptxas never ran.
  int cold_registers = -1;
  double warm_ms = 0;
  std::vector<std::pair<std::string, double>> warm_phases_ms; // passes+codegen, lookup
  bool warm_cache_hit = false; // false would mean the warm path compiled (cache not writable)
  ops::KernelProgram program;  // the built program, compiled and loaded: reuse it to launch
};

/// Measures (op, p, c) for `arch`, which must be the current GPU's, on tensors shaped like
/// `args` (the shapes and alignment pick the kernel variant). Populates the caches first, so
/// the warm number is a cache hit and the cold one excludes NVRTC's one-time library load.
CompileReport measure_compile(const ops::Operator& op, const ops::Problem& p, const ops::Config& c,
                              const std::string& arch, const std::vector<cuda::DeviceTensor>& args);

} // namespace tp::perf
