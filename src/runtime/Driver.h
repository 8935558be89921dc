// The CUDA driver API, loaded from libcuda.so.1 at run time. cuda.h is used for types and
// prototypes only; nothing links against libcuda, so the binary starts without a driver.
#pragma once
#include <cuda.h>
#include <memory>
#include <string>

#include "runtime/DynamicLibrary.h"
#include "tilepilot/runtime.h"

namespace tp::rt {

// Entry points we use. cuda.h #defines many of these to versioned symbols (cuMemAlloc ->
// cuMemAlloc_v2); the X-macro argument is expanded before use, so the member, its type and the
// dlsym name all follow cuda.h, and `driver().cuMemAlloc(...)` calls the right version.
#define TILEPILOT_CU_FUNCS(X)                                                                      \
  X(cuInit)                                                                                        \
  X(cuDriverGetVersion)                                                                            \
  X(cuGetErrorName)                                                                                \
  X(cuGetErrorString)                                                                              \
  X(cuDeviceGetCount)                                                                              \
  X(cuDeviceGet)                                                                                   \
  X(cuDeviceGetName)                                                                               \
  X(cuDeviceGetAttribute)                                                                          \
  X(cuDeviceTotalMem)                                                                              \
  X(cuDevicePrimaryCtxRetain)                                                                      \
  X(cuDevicePrimaryCtxRelease)                                                                     \
  X(cuCtxSetCurrent)                                                                               \
  X(cuCtxGetCurrent)                                                                               \
  X(cuCtxSynchronize)                                                                              \
  X(cuModuleLoadData)                                                                              \
  X(cuModuleUnload)                                                                                \
  X(cuModuleGetFunction)                                                                           \
  X(cuFuncSetAttribute)                                                                            \
  X(cuFuncGetAttribute)                                                                            \
  X(cuLaunchKernel)                                                                                \
  X(cuMemAlloc)                                                                                    \
  X(cuMemFree)                                                                                     \
  X(cuMemGetInfo)                                                                                  \
  X(cuMemcpyHtoD)                                                                                  \
  X(cuMemcpyDtoH)                                                                                  \
  X(cuMemcpyDtoD)                                                                                  \
  X(cuMemcpyHtoDAsync)                                                                             \
  X(cuMemcpyDtoHAsync)                                                                             \
  X(cuMemcpyDtoDAsync)                                                                             \
  X(cuMemsetD8)                                                                                    \
  X(cuMemsetD32)                                                                                   \
  X(cuMemsetD8Async)                                                                               \
  X(cuMemsetD32Async)                                                                              \
  X(cuStreamCreate)                                                                                \
  X(cuStreamDestroy)                                                                               \
  X(cuStreamSynchronize)                                                                           \
  X(cuEventCreate)                                                                                 \
  X(cuEventDestroy)                                                                                \
  X(cuEventRecord)                                                                                 \
  X(cuEventSynchronize)                                                                            \
  X(cuEventElapsedTime)
// Newer entry points: null when the driver predates them; callers check.
#define TILEPILOT_CU_OPTIONAL_FUNCS(X)                                                             \
  X(cuLaunchKernelEx)                                                                              \
  X(cuOccupancyMaxActiveClusters)                                                                  \
  X(cuTensorMapEncodeTiled)

struct Driver {
#define TILEPILOT_X(n) decltype(&::n) n = nullptr;
  TILEPILOT_CU_FUNCS(TILEPILOT_X)
  TILEPILOT_CU_OPTIONAL_FUNCS(TILEPILOT_X)
#undef TILEPILOT_X
  DynamicLibrary lib;
  int version = 0; // cuDriverGetVersion: 13000 for 13.0

  /// Loads `library`, resolves the entry points and calls cuInit(0). Returns nullptr and the
  /// reason when any step fails. driver() uses this once with "libcuda.so.1".
  static std::unique_ptr<Driver> load(const std::string& library, std::string* why_not);
};

/// The process-wide driver. Throws a UserError ("no CUDA driver was found (...)", plus what
/// still works without one) when there is none; CPU and compile-only paths never call it.
Driver& driver();

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string cu_error_text(CUresult r);

/// Throws a UserError naming the call and the CUDA error when `r` is not CUDA_SUCCESS.
void check_cu(CUresult r, const char* call);
#define TILEPILOT_CU(call) ::tp::rt::check_cu((call), #call)

/// Makes the primary context of the selected device current on the calling thread, creating it
/// on first use. The device is 0, or $TILEPILOT_DEVICE. Returns the device handle.
CUdevice ensure_context();

/// The ordinal ensure_context() uses.
int selected_device_ordinal();

} // namespace tp::rt
