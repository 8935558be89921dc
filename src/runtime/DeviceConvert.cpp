// The device conversion (DeviceConvert.h): plain CUDA with no headers, like the GPU
// references, so it compiles anywhere NVRTC does.
#include "runtime/DeviceConvert.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace tp::rt {

namespace {

const char* kConvert = R"(
extern "C" __global__ void tp_f32_to_16(const float* in, unsigned short* out, long long n,
                                        int bf16) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float f = in[i];
    unsigned short h;
    if (bf16) {
      unsigned u = __float_as_uint(f);
      h = (u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)0x7fc0
                                          : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    } else {
      asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    }
    out[i] = h;
  }
}
)";

const std::string kName = "dispatch tp_f32_to_16";

std::string source() {
  return std::string("// TilePilot device conversion\n") + kConvert;
}

} // namespace

void compile_convert_kernel(const std::string& arch) {
  jit_compile_only(source(), "tp_f32_to_16", kName, arch, {});
}

void convert_f32(CUdeviceptr src, CUdeviceptr dst, int64_t n, DType dtype, CUstream s) {
  if (dtype == DType::f32) {
    TILEPILOT_CU(driver().cuMemcpyDtoDAsync(dst, src, size_t(n) * 4, s));
    return;
  }
  static std::mutex mu;
  static std::map<std::string, CUfunction> fns; // by arch: one module per device kind
  CUfunction fn;
  {
    std::string why;
    auto info = device_info(selected_device_ordinal(), &why);
    internal_assert(info.has_value()) << "convert_f32 without a GPU: " << why;
    std::lock_guard<std::mutex> g(mu);
    CUfunction& f = fns[info->arch];
    if (!f) f = jit_load(source(), "tp_f32_to_16", kName, info->arch, {}).fn;
    fn = f;
  }
  long long count = n;
  int bf16 = dtype == DType::bf16 ? 1 : 0;
  void* args[] = {&src, &dst, &count, &bf16};
  LaunchConfig cfg;
  cfg.grid = {static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 8192)), 1, 1};
  cfg.block = {256, 1, 1};
  cfg.stream = s;
  launch(fn, cfg, args);
}

} // namespace tp::rt
