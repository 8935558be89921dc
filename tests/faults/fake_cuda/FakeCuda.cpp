// A fake CUDA driver (built as libcuda.so.1 in build/fake-cuda/) for testing on a machine with
// no GPU what TilePilot does when a driver call fails. Device memory is host memory, kernels
// do nothing, and one chosen call returns a chosen CUresult:
//   TILEPILOT_FAKE_CU_FAIL=cuCtxSynchronize=700      the first call of that function fails
//   TILEPILOT_FAKE_CU_FAIL=cuLaunchKernel=2@3        the third call fails
// or, in process, tilepilot_fake_cu_fail("cuLaunchKernel", 2, 1). A sticky error (700, 719, ...)
// then fails every later call, as a real context does after a fault. Names are the ones
// cuda.h maps the entry points to (cuMemAlloc is cuMemAlloc_v2), since cuda.h is included.
#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

struct Injection {
  std::string fn;
  int code = 0, nth = 0, calls = 0;
  CUresult sticky = CUDA_SUCCESS;
};

std::mutex mu;
Injection& injection() {
  static Injection in = [] {
    Injection i;
    if (const char* e = std::getenv("TILEPILOT_FAKE_CU_FAIL")) {
      std::string s = e;
      size_t eq = s.find('='), at = s.find('@');
      if (eq != std::string::npos) {
        i.fn = s.substr(0, eq);
        i.code = std::atoi(s.c_str() + eq + 1);
        i.nth = at == std::string::npos ? 1 : std::atoi(s.c_str() + at + 1);
      }
    }
    return i;
  }();
  return in;
}

bool is_sticky(int c) {
  return c == 214 || (c >= 700 && c <= 719 && c != 701 && c != 703);
}

/// What the call `fn` returns before doing its work.
CUresult outcome(const char* fn) {
  std::lock_guard<std::mutex> l(mu);
  Injection& i = injection();
  if (i.sticky != CUDA_SUCCESS) return i.sticky;
  if (i.fn != fn || ++i.calls != i.nth) return CUDA_SUCCESS;
  if (is_sticky(i.code)) i.sticky = CUresult(i.code);
  return CUresult(i.code);
}

#define FAKE_CHECK(name)                                                                           \
  if (CUresult r = outcome(name); r != CUDA_SUCCESS) return r

const char* error_name(CUresult r) {
  switch (int(r)) {
  case 0:
    return "CUDA_SUCCESS";
  case 2:
    return "CUDA_ERROR_OUT_OF_MEMORY";
  case 700:
    return "CUDA_ERROR_ILLEGAL_ADDRESS";
  case 702:
    return "CUDA_ERROR_LAUNCH_TIMEOUT";
  case 715:
    return "CUDA_ERROR_ILLEGAL_INSTRUCTION";
  case 719:
    return "CUDA_ERROR_LAUNCH_FAILED";
  default:
    return nullptr;
  }
}

int handle_counter = 1;
template <typename T>
T new_handle() {
  std::lock_guard<std::mutex> l(mu);
  return reinterpret_cast<T>(static_cast<uintptr_t>(0x1000 * handle_counter++));
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) void tilepilot_fake_cu_fail(const char* fn, int code,
                                                                   int nth) {
  std::lock_guard<std::mutex> l(mu);
  Injection& i = injection();
  i = Injection{};
  i.fn = fn ? fn : "";
  i.code = code;
  i.nth = nth;
}

CUresult CUDAAPI cuInit(unsigned) {
  return CUDA_SUCCESS;
}
// NVRTC asks a loaded driver for its private tables (and crashes when the symbol is missing);
// "not found" makes it compile on its own, as with no driver.
CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid*) {
  *table = nullptr;
  return CUDA_ERROR_NOT_FOUND;
}
CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = CUDA_VERSION;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult r, const char** s) {
  *s = error_name(r);
  return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI cuGetErrorString(CUresult r, const char** s) {
  *s = r == CUDA_ERROR_OUT_OF_MEMORY     ? "out of memory"
       : r == CUDA_ERROR_ILLEGAL_ADDRESS ? "an illegal memory access was encountered"
                                         : (error_name(r) ? "fake driver error" : nullptr);
  return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI cuDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice* d, int) {
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  std::strncpy(name, "NVIDIA H200", size_t(len));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *v = 9;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *v = 0;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *v = 132;
    break;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
    *v = 50 << 20;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *v = 232448;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
    *v = 233472;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
    *v = 65536;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
    *v = 2048;
    break;
  default:
    *v = 1;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t* b, CUdevice) {
  *b = size_t(4) << 30;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) {
  *c = reinterpret_cast<CUcontext>(uintptr_t(0x10));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* c) {
  *c = reinterpret_cast<CUcontext>(uintptr_t(0x10));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSynchronize() {
  FAKE_CHECK("cuCtxSynchronize");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleLoadData(CUmodule* m, const void*) {
  FAKE_CHECK("cuModuleLoadData");
  *m = new_handle<CUmodule>();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule, const char*) {
  *f = new_handle<CUfunction>();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction) {
  *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 64 : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, unsigned, CUstream, void**, void**) {
  FAKE_CHECK("cuLaunchKernel");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void**, void**) {
  FAKE_CHECK("cuLaunchKernelEx");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* m, CUtensorMapDataType, cuuint32_t, void*,
                                        const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                        const cuuint32_t*, CUtensorMapInterleave,
                                        CUtensorMapSwizzle, CUtensorMapL2promotion,
                                        CUtensorMapFloatOOBfill) {
  std::memset(m, 0, sizeof *m);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  FAKE_CHECK("cuMemAlloc");
  *p = reinterpret_cast<CUdeviceptr>(std::aligned_alloc(256, (bytes + 255) / 256 * 256));
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo(size_t* free, size_t* total) {
  *free = size_t(1) << 30;
  *total = size_t(4) << 30;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void* s, size_t n) {
  FAKE_CHECK("cuMemcpyHtoD");
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoH(void* d, CUdeviceptr s, size_t n) {
  FAKE_CHECK("cuMemcpyDtoH");
  std::memcpy(d, reinterpret_cast<void*>(s), n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr d, CUdeviceptr s, size_t n) {
  FAKE_CHECK("cuMemcpyDtoD");
  std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<void*>(s), n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream) {
  return cuMemcpyHtoD(d, s, n);
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream) {
  return cuMemcpyDtoH(d, s, n);
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
  return cuMemcpyDtoD(d, s, n);
}
CUresult CUDAAPI cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
  FAKE_CHECK("cuMemsetD8");
  std::memset(reinterpret_cast<void*>(d), v, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD32(CUdeviceptr d, unsigned v, size_t n) {
  FAKE_CHECK("cuMemsetD32");
  auto* p = reinterpret_cast<unsigned*>(d);
  for (size_t i = 0; i < n; ++i)
    p[i] = v;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream) {
  return cuMemsetD8(d, v, n);
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream) {
  return cuMemsetD32(d, v, n);
}
CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned) {
  *s = new_handle<CUstream>();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream) {
  FAKE_CHECK("cuStreamSynchronize");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned) {
  *e = new_handle<CUevent>();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent, CUstream) {
  FAKE_CHECK("cuEventRecord");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent) {
  FAKE_CHECK("cuEventSynchronize");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent, CUevent) {
  FAKE_CHECK("cuEventElapsedTime");
  *ms = 0.5f;
  return CUDA_SUCCESS;
}

} // extern "C"
