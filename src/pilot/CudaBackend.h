// The CUDA backend's pilot hooks: the GPU check, compile-only (NVRTC, no GPU), cold/warm compile,
// warm timing side by side with the framework reference, peak memory, autotuning through the
// registered tuning hooks, and the fallback test. Each hook that needs what this machine lacks
// (a GPU, a driver, NVRTC, a device of the target arch) throws StageSkipped saying which.
#pragma once
#include "pilot/Backends.h"

namespace tp::pilot {

struct CudaBackendOptions {
  double tune_budget_seconds = 300; // per representative shape
  int warm_runs = 50, warm_warmup = 10;
};

/// Fills every hook of `b` except device and model_run.
void add_cuda_backend(Backends& b, const CudaBackendOptions& o = {});

} // namespace tp::pilot
