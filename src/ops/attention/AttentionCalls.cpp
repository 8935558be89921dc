// tp::ops::attention: the Dispatcher's typed entry points for this operator, on Dispatcher::run.
#include "tilepilot/dispatch.h"

namespace tp::ops {

void Dispatcher::attention(const HostTensor& Q, const HostTensor& K, const HostTensor& V,
                           HostTensor& O, bool causal) {
  // run() only writes the outputs; the inputs are passed as non-const for the one signature.
  run("attention",
      {const_cast<HostTensor*>(&Q), const_cast<HostTensor*>(&K), const_cast<HostTensor*>(&V), &O},
      {{"causal", causal ? "1" : "0"}});
}

void Dispatcher::attention(const DeviceView& Q, const DeviceView& K, const DeviceView& V,
                           const DeviceView& O, bool causal, void* stream) {
  run("attention", std::vector<DeviceView>{Q, K, V, O}, {{"causal", causal ? "1" : "0"}}, stream);
}

void attention(const HostTensor& Q, const HostTensor& K, const HostTensor& V, HostTensor& O,
               bool causal) {
  default_dispatcher().attention(Q, K, V, O, causal);
}

void attention(const DeviceView& Q, const DeviceView& K, const DeviceView& V, const DeviceView& O,
               bool causal, void* stream) {
  default_dispatcher().attention(Q, K, V, O, causal, stream);
}

} // namespace tp::ops
