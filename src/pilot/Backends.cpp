// The pilot's backend hooks in this build. Only the device probe is filled in; the CUDA backend
// (check, compile-only, timing, memory), the model runner, the tuner and the vendor fallback
// register their hooks here as they land. Until then their stages say `not run`.
#include "pilot/Backends.h"

namespace tp::pilot {

Backends default_backends() {
  Backends b;
  b.device = [](std::string* why_not) { return rt::device_info(0, why_not); };
  return b;
}

} // namespace tp::pilot
