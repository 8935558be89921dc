// DeviceTensor helpers, DeviceArray (owning device memory) and the machine queries of
// tilepilot/device.h, on the dlopen'd driver.
#include <algorithm>

#include "runtime/DeviceBuffer.h"
#include "runtime/DeviceFaults.h"
#include "runtime/Driver.h"
#include "runtime/Timing.h"
#include "tilepilot/device.h"
#include "tilepilot/error.h"

namespace tp {

int64_t DeviceTensor::numel() const {
  int64_t n = 1;
  for (int64_t e : shape)
    n *= e;
  return n;
}

std::vector<int64_t> DeviceTensor::element_strides() const {
  if (!strides.empty()) return strides;
  std::vector<int64_t> s(shape.size());
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = step;
    step *= shape[d];
  }
  return s;
}

bool DeviceTensor::contiguous() const {
  if (strides.empty()) return true;
  DeviceTensor dense(ptr, dtype, shape);
  std::vector<int64_t> want = dense.element_strides();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && strides[d] != want[d]) return false;
  return true;
}

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

size_t checked_bytes(DType t, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) {
    if (e < 0) user_error() << "DeviceArray: negative extent " << e << " in the shape";
    if (e > 0 && n > (int64_t{1} << 46) / e)
      user_error() << "DeviceArray: the shape has more elements than any GPU holds";
    n *= e;
  }
  return static_cast<size_t>(n) * dtype_bytes(t);
}

void check_same(const char* op, const DeviceTensor& d, const HostTensor& h) {
  if (d.dtype != h.dtype() || d.shape != h.shape())
    user_error() << "DeviceArray::" << op << ": the host tensor is " << dtype_name(h.dtype())
                 << h.shape_str() << " but the device array is " << dtype_name(d.dtype)
                 << shape_text(d.shape) << "; dtype and shape must match";
}

} // namespace

DeviceArray::DeviceArray(DType t, std::vector<int64_t> shape) {
  bytes_ = checked_bytes(t, shape);
  rt::ensure_context();
  CUdeviceptr p = 0;
  if (bytes_) rt::check_cu_alloc(rt::driver().cuMemAlloc(&p, bytes_), "cuMemAlloc", bytes_);
  view_ = DeviceTensor(static_cast<uint64_t>(p), t, std::move(shape));
}

DeviceArray DeviceArray::from(const HostTensor& host) {
  DeviceArray a(host.dtype(), host.shape());
  a.upload(host);
  return a;
}

DeviceArray::~DeviceArray() {
  if (view_.ptr) rt::driver().cuMemFree(static_cast<CUdeviceptr>(view_.ptr));
}

DeviceArray::DeviceArray(DeviceArray&& o) noexcept {
  *this = std::move(o);
}

DeviceArray& DeviceArray::operator=(DeviceArray&& o) noexcept {
  if (this != &o) {
    if (view_.ptr) rt::driver().cuMemFree(static_cast<CUdeviceptr>(view_.ptr));
    view_ = std::move(o.view_);
    bytes_ = o.bytes_;
    o.view_ = {};
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceArray::upload(const HostTensor& host) {
  check_same("upload", view_, host);
  if (bytes_) TILEPILOT_CU(rt::driver().cuMemcpyHtoD(view_.ptr, host.data(), bytes_));
}

void DeviceArray::download(HostTensor& host) const {
  check_same("download", view_, host);
  if (bytes_) TILEPILOT_CU(rt::driver().cuMemcpyDtoH(host.data(), view_.ptr, bytes_));
}

HostTensor DeviceArray::to_host() const {
  HostTensor h(view_.dtype, view_.shape);
  download(h);
  return h;
}

void DeviceArray::fill_bytes(uint8_t value) {
  if (bytes_) TILEPILOT_CU(rt::driver().cuMemsetD8(view_.ptr, value, bytes_));
}

CudaStream::CudaStream() {
  rt::ensure_context();
  CUstream s = nullptr;
  TILEPILOT_CU(rt::driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  stream_ = reinterpret_cast<Stream>(s);
}

CudaStream::~CudaStream() {
  if (stream_) rt::driver().cuStreamDestroy(reinterpret_cast<CUstream>(stream_));
}

void CudaStream::synchronize() const {
  TILEPILOT_CU(rt::driver().cuStreamSynchronize(reinterpret_cast<CUstream>(stream_)));
}

Event::Event() {
  rt::ensure_context();
  CUevent e = nullptr;
  TILEPILOT_CU(rt::driver().cuEventCreate(&e, CU_EVENT_DEFAULT));
  event_ = e;
}

Event::~Event() {
  if (event_) rt::driver().cuEventDestroy(static_cast<CUevent>(event_));
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_) rt::driver().cuEventDestroy(static_cast<CUevent>(event_));
    event_ = o.event_;
    o.event_ = nullptr;
  }
  return *this;
}

void Event::record(Stream stream) {
  TILEPILOT_CU(
      rt::driver().cuEventRecord(static_cast<CUevent>(event_), reinterpret_cast<CUstream>(stream)));
}

float Event::elapsed_ms(const Event& start, const Event& stop) {
  TILEPILOT_CU(rt::driver().cuEventSynchronize(static_cast<CUevent>(stop.event_)));
  float ms = 0;
  TILEPILOT_CU(rt::driver().cuEventElapsedTime(&ms, static_cast<CUevent>(start.event_),
                                               static_cast<CUevent>(stop.event_)));
  return ms;
}

DeviceMemory device_memory() {
  rt::ensure_context();
  size_t free_b = 0, total_b = 0;
  TILEPILOT_CU(rt::driver().cuMemGetInfo(&free_b, &total_b));
  return {free_b, total_b};
}

std::string format_bytes(uint64_t bytes) {
  return rt::format_bytes(bytes);
}

bool gpu_available(std::string* why_not) {
  return rt::device_count(why_not) > 0;
}

std::string current_arch() {
  std::string why;
  auto info = rt::device_info(rt::selected_device_ordinal(), &why);
  if (!info) user_error() << "no CUDA GPU to compile for: " << why;
  return info->arch;
}

void synchronize() {
  rt::ensure_context();
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
}

double measure_copy_bandwidth(size_t bytes, int runs) {
  bytes = std::max<size_t>(bytes / 2, 1 << 20); // half read, half written
  rt::DeviceBuffer src(bytes), dst(bytes);
  src.memset(1);
  rt::TimingOptions o;
  o.runs = runs;
  o.flush_l2 = false; // the copy is far larger than the L2
  rt::TimingHarness h(o);
  rt::Timing t = h.time([&](CUstream s) {
    TILEPILOT_CU(rt::driver().cuMemcpyDtoDAsync(dst.ptr(), src.ptr(), bytes, s));
  });
  return 2.0 * static_cast<double>(bytes) / (t.median_ms * 1e6);
}

} // namespace tp
