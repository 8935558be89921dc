// The pilot's backend hooks in this build: the device probe, the CUDA backend (check,
// compile-only, compile timing, warm timing, memory, autotune, fallback; see CudaBackend.h) and,
// when it lands, the model runner. A hook that cannot run on this machine throws StageSkipped,
// so its stage says `not run: <reason>`.
#include "pilot/Backends.h"

#include "autotune/CudaHooks.h"
#include "pilot/CudaBackend.h"
#include "pilot/ModelBackend.h"

namespace tp::pilot {

Backends default_backends() {
  Backends b;
  b.device = [](std::string* why_not) { return rt::device_info(0, why_not); };
  // The pilot's autotune stage goes through the tuner's default hooks; register them here too,
  // because a library user may build a pilot without going through the CLI's main().
  autotune::register_cuda_tune_hooks();
  add_cuda_backend(b);
  add_model_hook(b); // the Llama prefill (models/llama); see ModelBackend.h
  return b;
}

} // namespace tp::pilot
