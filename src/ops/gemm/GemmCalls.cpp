// tp::ops::gemm: the Dispatcher's typed entry points for this operator, on Dispatcher::run.
#include "tilepilot/dispatch.h"

namespace tp::ops {

void Dispatcher::gemm(const HostTensor& A, const HostTensor& B, HostTensor& C,
                      const std::string& layout) {
  // run() only writes the outputs; the inputs are passed as non-const for the one signature.
  run("gemm", {const_cast<HostTensor*>(&A), const_cast<HostTensor*>(&B), &C}, {{"layout", layout}});
}

void Dispatcher::gemm(const DeviceView& A, const DeviceView& B, const DeviceView& C,
                      const std::string& layout, void* stream) {
  run("gemm", std::vector<DeviceView>{A, B, C}, {{"layout", layout}}, stream);
}

void gemm(const HostTensor& A, const HostTensor& B, HostTensor& C, const std::string& layout) {
  default_dispatcher().gemm(A, B, C, layout);
}

void gemm(const DeviceView& A, const DeviceView& B, const DeviceView& C, const std::string& layout,
          void* stream) {
  default_dispatcher().gemm(A, B, C, layout, stream);
}

} // namespace tp::ops
