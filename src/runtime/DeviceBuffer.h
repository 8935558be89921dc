// DeviceBuffer: one cuMemAlloc'd range of device memory, freed when the object dies. Transfers
// are synchronous unless a stream is given. Out of memory is reported with the requested and
// the free amount.
#pragma once
#include <cstdint>
#include <cuda.h>
#include <string>
#include <utility>
#include <vector>

namespace tp::rt {

class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

  /// Copies `bytes` from host `src` to this buffer at `offset`. Async on `stream` if non-null
  /// (then `src` must stay alive until the stream reaches the copy).
  void upload(const void* src, size_t bytes, size_t offset = 0, CUstream stream = nullptr);
  void download(void* dst, size_t bytes, size_t offset = 0, CUstream stream = nullptr) const;
  void copy_from(const DeviceBuffer& src, size_t bytes, CUstream stream = nullptr);
  void memset(uint8_t value, CUstream stream = nullptr);
  void memset32(uint32_t value, CUstream stream = nullptr); // bytes() must be a multiple of 4

  template <typename T>
  static DeviceBuffer from(const std::vector<T>& host) {
    DeviceBuffer b(host.size() * sizeof(T));
    b.upload(host.data(), b.bytes());
    return b;
  }
  template <typename T>
  std::vector<T> to_vector() const {
    std::vector<T> out(bytes_ / sizeof(T));
    download(out.data(), out.size() * sizeof(T));
    return out;
  }

private:
  void check_range(const char* op, size_t bytes, size_t offset) const;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

/// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(uint64_t bytes);

} // namespace tp::rt
