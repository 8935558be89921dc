// Host execution of the model.
#include "llama/HostExec.h"

#include <cstring>

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

void HostExec::dispatch(const std::string& op, const std::vector<Buf>& args,
                        const std::map<std::string, std::string>& options) {
  // A host tensor owns its shape: an argument seen with another shape (Buf::reshaped) is
  // copied into a tensor of that shape and back afterwards. Only the interpreter pays for it.
  std::deque<HostTensor> views;
  std::vector<HostTensor*> ptrs;
  for (const Buf& b : args) {
    if (b.host->shape() == b.shape) {
      ptrs.push_back(b.host);
      continue;
    }
    views.emplace_back(b.dtype, b.shape);
    std::memcpy(views.back().data(), b.host->data(), b.host->bytes());
    ptrs.push_back(&views.back());
  }
  dispatcher().run(op, ptrs, options);
  for (size_t i = 0, v = 0; i < args.size(); ++i)
    if (args[i].host->shape() != args[i].shape)
      std::memcpy(args[i].host->data(), views[v++].data(), args[i].host->bytes());
}

void HostExec::op_begin(const std::string&) {
  t0_ = std::chrono::steady_clock::now();
}

void HostExec::op_end(const std::string& label) {
  times_[label] +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

} // namespace tp::models
