// DeviceBuffer: allocation with an out-of-memory message that says what was asked and what is
// free, and bounds-checked transfers.
#include "runtime/DeviceBuffer.h"

#include <fmt/format.h>

#include "runtime/AllocationStats.h"
#include "runtime/DeviceFaults.h"
#include "runtime/Driver.h"
#include "tilepilot/error.h"

namespace tp::rt {

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  ensure_context();
  CUresult r = driver().cuMemAlloc(&ptr_, bytes);
  if (r != CUDA_SUCCESS) ptr_ = 0;
  check_cu_alloc(r, "cuMemAlloc", bytes); // out of memory: the bytes asked for and what is free
  note_device_alloc(bytes);
}

DeviceBuffer::~DeviceBuffer() {
  // A failing free here (e.g. a sticky error after a kernel fault) must not throw from a
  // destructor; the fault itself is reported by the call that observes it.
  if (ptr_) {
    note_device_free(bytes_);
    driver().cuMemFree(ptr_);
  }
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) {
      note_device_free(bytes_);
      driver().cuMemFree(ptr_);
    }
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::check_range(const char* op, size_t bytes, size_t offset) const {
  internal_assert(offset <= bytes_ && bytes <= bytes_ - offset)
      << "DeviceBuffer::" << op << " of " << bytes << " bytes at offset " << offset
      << " exceeds the buffer (" << bytes_ << " bytes)";
}

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset, CUstream stream) {
  check_range("upload", bytes, offset);
  if (!bytes) return;
  ensure_context();
  if (stream)
    TILEPILOT_CU(driver().cuMemcpyHtoDAsync(ptr_ + offset, src, bytes, stream));
  else
    TILEPILOT_CU(driver().cuMemcpyHtoD(ptr_ + offset, src, bytes));
}

void DeviceBuffer::download(void* dst, size_t bytes, size_t offset, CUstream stream) const {
  check_range("download", bytes, offset);
  if (!bytes) return;
  ensure_context();
  if (stream)
    TILEPILOT_CU(driver().cuMemcpyDtoHAsync(dst, ptr_ + offset, bytes, stream));
  else
    TILEPILOT_CU(driver().cuMemcpyDtoH(dst, ptr_ + offset, bytes));
}

void DeviceBuffer::copy_from(const DeviceBuffer& src, size_t bytes, CUstream stream) {
  check_range("copy_from", bytes, 0);
  src.check_range("copy_from (source)", bytes, 0);
  if (!bytes) return;
  ensure_context();
  if (stream)
    TILEPILOT_CU(driver().cuMemcpyDtoDAsync(ptr_, src.ptr_, bytes, stream));
  else
    TILEPILOT_CU(driver().cuMemcpyDtoD(ptr_, src.ptr_, bytes));
}

void DeviceBuffer::memset(uint8_t value, CUstream stream) {
  if (!bytes_) return;
  ensure_context();
  if (stream)
    TILEPILOT_CU(driver().cuMemsetD8Async(ptr_, value, bytes_, stream));
  else
    TILEPILOT_CU(driver().cuMemsetD8(ptr_, value, bytes_));
}

void DeviceBuffer::memset32(uint32_t value, CUstream stream) {
  internal_assert(bytes_ % 4 == 0) << "memset32 on a buffer of " << bytes_ << " bytes";
  if (!bytes_) return;
  ensure_context();
  if (stream)
    TILEPILOT_CU(driver().cuMemsetD32Async(ptr_, value, bytes_ / 4, stream));
  else
    TILEPILOT_CU(driver().cuMemsetD32(ptr_, value, bytes_ / 4));
}

} // namespace tp::rt
