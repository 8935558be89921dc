// GPU execution of the model, on the public API only (tilepilot/compile.h, device.h).
#include "llama/DeviceExec.h"

#include <algorithm>
#include <thread>

namespace tp::models {

namespace {

DeviceTensor tensor(const Buf& b) {
  return DeviceTensor(b.dev, b.dtype, b.shape);
}

ops::DeviceView view(const Buf& b) {
  return {b.dev, b.dtype, b.shape};
}

ops::DeviceIdentity gpu_or_explain() {
  std::string why;
  if (!gpu_available(&why))
    user_error() << "the model on the GPU needs one: " << why
                 << "; without a GPU, run the tiny model on the interpreter (tilepilot model "
                    "--backend cpu --preset tiny)";
  return ops::current_device();
}

} // namespace

DeviceExec::DeviceExec() : device_(gpu_or_explain()) {
  baseline_used_ = peak_used_ = device_used_bytes();
}

Buf DeviceExec::alloc(DType t, std::vector<int64_t> shape) {
  Buf b;
  b.dtype = t;
  b.shape = std::move(shape);
  // Never empty: a zero-size buffer has no address, and kernels check for null pointers.
  store_.emplace_back(t, b.numel() ? b.shape : std::vector<int64_t>{1});
  bytes_ += store_.back().bytes();
  b.dev = store_.back().tensor().ptr;
  return b;
}

void DeviceExec::fill_uniform(Buf& b, uint64_t seed, double center, double half_width) {
  // The values are made on the host, on every core, then uploaded: the host executor computes
  // the same uniform_value() stream, so both models hold identical weights.
  HostTensor h(b.dtype, b.shape);
  const int64_t n = h.numel();
  const int workers = static_cast<int>(std::clamp<int64_t>(
      n / (int64_t{1} << 20), 1, std::max(1u, std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int64_t i = n * w / workers; i < n * (w + 1) / workers; ++i)
        h.set(i, uniform_value(seed, static_cast<uint64_t>(i), center, half_width));
    });
  for (std::thread& t : pool)
    t.join();
  upload(b, h);
}

void DeviceExec::upload(Buf& b, const HostTensor& h) {
  internal_assert(h.shape() == b.shape && h.dtype() == b.dtype) << "upload: shape mismatch";
  synchronize(); // the copy runs on the legacy stream, which this stream does not wait for
  for (DeviceArray& a : store_)
    if (a.tensor().ptr == b.dev) {
      a.upload(h);
      tp::synchronize();
      return;
    }
  internal_assert(false) << "upload: buffer not allocated by this executor";
}

HostTensor DeviceExec::download(const Buf& b) {
  synchronize(); // the stream does not synchronize with the legacy stream the copy uses
  for (const DeviceArray& a : store_)
    if (a.tensor().ptr == b.dev) {
      HostTensor h = a.to_host();
      if (h.shape() == b.shape) return h;
    }
  internal_assert(false) << "download: buffer not allocated by this executor";
  return {};
}

void DeviceExec::run(const Kernel& k, const std::vector<const Buf*>& args) {
  auto it = kernels_.find(k.ptr().get());
  if (it == kernels_.end())
    it = kernels_.emplace(k.ptr().get(), compile(k, {.arch = device_.arch})).first;
  std::vector<Arg> t;
  for (const Buf* b : args)
    t.emplace_back(tensor(*b));
  it->second.launch(t, stream());
}

void DeviceExec::dispatch(const std::string& op, const std::vector<Buf>& args,
                          const std::map<std::string, std::string>& options) {
  std::vector<ops::DeviceView> views;
  for (const Buf& b : args)
    views.push_back(view(b));
  dispatcher().run(op, views, options, stream());
}

Event& DeviceExec::event() {
  if (next_event_ == pool_.size()) pool_.emplace_back();
  return pool_[next_event_++];
}

void DeviceExec::op_begin(const std::string&) {
  if (!profiling_) return;
  open_ = &event();
  open_->record(stream());
}

void DeviceExec::op_end(const std::string& label) {
  if (!profiling_) return;
  Event* stop = &event();
  stop->record(stream());
  marks_.push_back({label, {open_, stop}});
  // Workspaces (cuBLASLt, cuDNN) are allocated inside the operator that first needs them.
  synchronize();
  peak_used_ = std::max(peak_used_, device_used_bytes());
}

OpTimes DeviceExec::collect_op_times() {
  synchronize();
  OpTimes out;
  for (const auto& [label, ev] : marks_)
    out[label] += Event::elapsed_ms(*ev.first, *ev.second);
  marks_.clear();
  next_event_ = 0;
  return out;
}

} // namespace tp::models
