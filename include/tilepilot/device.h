// Device memory as a user's program sees it: a non-owning DeviceTensor (address, dtype, shape,
// strides) that kernels are launched on, and an owning DeviceArray for programs that allocate
// their own. Everything is loaded at run time: without a GPU these calls throw a UserError
// that says what is missing, and nothing else breaks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tilepilot/dtype.h"
#include "tilepilot/tensor.h"

struct CUstream_st; // cuda.h's stream type; a null stream is the legacy default stream

namespace tp {

using Stream = CUstream_st*;

/// A view of device memory. `strides` are in elements, outermost first (PyTorch's convention);
/// empty means contiguous row-major. The memory stays the caller's.
struct DeviceTensor {
  uint64_t ptr = 0; // device address (a CUdeviceptr)
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;

  DeviceTensor() = default;
  DeviceTensor(uint64_t p, DType t, std::vector<int64_t> s, std::vector<int64_t> st = {})
      : ptr(p), dtype(t), shape(std::move(s)), strides(std::move(st)) {}
  DeviceTensor(const void* p, DType t, std::vector<int64_t> s, std::vector<int64_t> st = {})
      : DeviceTensor(reinterpret_cast<uint64_t>(p), t, std::move(s), std::move(st)) {}
  int64_t numel() const;
  /// The strides in elements, filled in for a contiguous tensor.
  std::vector<int64_t> element_strides() const;
  bool contiguous() const;
};

/// An owning, contiguous device allocation, freed when it dies (move-only).
class DeviceArray {
public:
  DeviceArray() = default;
  DeviceArray(DType t, std::vector<int64_t> shape);
  /// A device copy of `host` (same dtype and shape).
  static DeviceArray from(const HostTensor& host);
  ~DeviceArray();
  DeviceArray(DeviceArray&& o) noexcept;
  DeviceArray& operator=(DeviceArray&& o) noexcept;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  DeviceTensor tensor() const { return view_; }
  operator DeviceTensor() const { return view_; }
  size_t bytes() const { return bytes_; }
  /// Host <-> device copies; dtype and shape must match. Synchronous.
  void upload(const HostTensor& host);
  void download(HostTensor& host) const;
  HostTensor to_host() const;
  /// Sets every byte to `value` (0xff poisons floats as NaN).
  void fill_bytes(uint8_t value);

private:
  DeviceTensor view_;
  size_t bytes_ = 0;
};

/// An owning non-blocking stream: it does not synchronize with the legacy default stream.
class CudaStream {
public:
  CudaStream();
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  Stream get() const { return stream_; }
  void synchronize() const;

private:
  Stream stream_ = nullptr;
};

/// A CUDA event for timing: record it on a stream, then read the time between two.
class Event {
public:
  Event();
  ~Event();
  Event(Event&& o) noexcept : event_(o.event_) { o.event_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(Stream stream = nullptr);
  /// Waits for `stop`, then returns the milliseconds between `start` and `stop`.
  static float elapsed_ms(const Event& start, const Event& stop);

private:
  void* event_ = nullptr; // a CUevent
};

/// The current GPU's memory as the driver reports it (all processes together).
struct DeviceMemory {
  uint64_t free_bytes = 0, total_bytes = 0;
  uint64_t used_bytes() const { return total_bytes - free_bytes; }
};
DeviceMemory device_memory();

/// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(uint64_t bytes);

/// Whether a CUDA GPU can be used; if not, `why_not` says which step failed.
bool gpu_available(std::string* why_not = nullptr);
/// The NVRTC target of the current GPU ("sm_90a"); a UserError without one.
std::string current_arch();
/// Waits until all work on the current GPU is done; errors of earlier launches surface here.
void synchronize();
/// Device-to-device copy bandwidth of the current GPU in GB/s (bytes read + written per
/// second, median of `runs` copies of `bytes`): the ceiling memory-bound kernels compare with.
double measure_copy_bandwidth(size_t bytes = size_t(1) << 30, int runs = 20);

} // namespace tp
