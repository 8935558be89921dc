// Host execution of the model.
#include "llama/HostExec.h"

#include "tilepilot/interpret.h"

namespace tp::models {

Buf HostExec::alloc(DType t, std::vector<int64_t> shape) {
  store_.emplace_back(t, shape);
  bytes_ += store_.back().bytes();
  Buf b;
  b.dtype = t;
  b.shape = std::move(shape);
  b.host = &store_.back();
  return b;
}

void HostExec::fill_uniform(Buf& b, uint64_t seed, double center, double half_width) {
  for (int64_t i = 0; i < b.numel(); ++i)
    b.host->set(i, uniform_value(seed, static_cast<uint64_t>(i), center, half_width));
}

void HostExec::upload(Buf& b, const HostTensor& h) {
  internal_assert(h.shape() == b.shape && h.dtype() == b.dtype) << "upload: shape mismatch";
  *b.host = h;
}

void HostExec::run(const Kernel& k, const std::vector<const Buf*>& args) {
  std::vector<HostArg> host;
  for (const Buf* b : args)
    host.emplace_back(b->host);
  interpret(k, host);
}

void HostExec::gemm(const Buf& A, const Buf& B, const Buf& C, const std::string& layout) {
  dispatcher().gemm(*A.host, *B.host, *C.host, layout);
}

void HostExec::attention(const Buf& Q, const Buf& K, const Buf& V, const Buf& O, bool causal) {
  dispatcher().attention(*Q.host, *K.host, *V.host, *O.host, causal);
}

void HostExec::op_begin(const std::string&) {
  t0_ = std::chrono::steady_clock::now();
}

void HostExec::op_end(const std::string& label) {
  times_[label] +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

} // namespace tp::models
