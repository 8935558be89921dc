// The CUDA backend's pilot hooks: the GPU check, compile-only (NVRTC, no GPU), cold/warm compile,
// warm timing side by side with the framework reference, peak memory, autotuning through the
// registered tuning hooks, and the fallback test. Each hook that needs what this machine lacks
// (a GPU, a driver, NVRTC, a device of the target arch) throws StageSkipped saying which.
#pragma once
#include "pilot/Backends.h"

namespace tp::pilot {

struct CudaBackendOptions {
  // Per representative shape. A spec has up to four, so tuning one operator stays under ten
  // minutes (issue 6); the H200 runs of 2026-11-30 found the best config within 30 s a shape.
  double tune_budget_seconds = 120;
  int warm_runs = 50, warm_warmup = 10;
};

/// Fills every hook of `b` except device and model_run.
void add_cuda_backend(Backends& b, const CudaBackendOptions& o = {});

} // namespace tp::pilot
