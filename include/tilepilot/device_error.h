// Errors from the GPU itself, apart from bad input. A DeviceFault is a kernel the GPU stopped
// (a trap, an illegal or misaligned address, an assert, a time limit): the CUDA context is lost
// and every later GPU call in the process fails, so nothing can fall back or retry; the message
// names the last kernel launched and how to reproduce. DeviceOutOfMemory is device memory
// running out at an allocation or a launch: the problem is too large for the GPU's free memory,
// which a caller may answer by falling back or freeing memory, so it is a UserError.
#pragma once
#include <cstdint>
#include <string>

#include "tilepilot/error.h"

namespace tp {

class DeviceFault : public Error {
public:
  /// `cu_error` is the driver's name ("CUDA_ERROR_ILLEGAL_ADDRESS"); `kernel` the last kernel
  /// TilePilot launched ("" when none was).
  DeviceFault(const std::string& what, std::string cu_error, std::string kernel)
      : Error(Kind::internal, {}, what), cu_error_(std::move(cu_error)),
        kernel_(std::move(kernel)) {}
  const std::string& cu_error() const { return cu_error_; }
  const std::string& kernel() const { return kernel_; }

private:
  std::string cu_error_, kernel_;
};

class DeviceOutOfMemory : public UserError {
public:
  /// `requested_bytes` is 0 when the call does not say (a launch's local memory).
  DeviceOutOfMemory(const std::string& what, uint64_t requested_bytes)
      : UserError({}, what), requested_bytes_(requested_bytes) {}
  uint64_t requested_bytes() const { return requested_bytes_; }

private:
  uint64_t requested_bytes_;
};

} // namespace tp
