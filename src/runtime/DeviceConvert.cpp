// The device conversion (DeviceConvert.h): plain CUDA with no headers, like the GPU
// references, so it compiles anywhere NVRTC does.
#include "runtime/DeviceConvert.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>

#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace tp::rt {

namespace {

// Element i of the row-major order over [n / (e1 e2 e3), e1, e2, e3] goes to out + the dot of
// its index with s0..s3: a contiguous output is e1 = e2 = 1, e3 = n, s3 = 1.
const char* kConvert = R"(
extern "C" __global__ void tp_f32_to_16(const float* in, unsigned short* out, long long n,
                                        int bf16, long long e1, long long e2, long long e3,
                                        long long s0, long long s1, long long s2, long long s3) {
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
    long long r = i / e3, d3 = i % e3, d2 = r % e2;
    r /= e2;
    out[(r / e1) * s0 + (r % e1) * s1 + d2 * s2 + d3 * s3] = h;
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

namespace {

void launch_convert(CUdeviceptr src, CUdeviceptr dst, int64_t n, DType dtype,
                    const std::array<int64_t, 3>& inner, const std::array<int64_t, 4>& strides,
                    CUstream s) {
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
  long long count = n, e1 = inner[0], e2 = inner[1], e3 = inner[2];
  long long s0 = strides[0], s1 = strides[1], s2 = strides[2], s3 = strides[3];
  int bf16 = dtype == DType::bf16 ? 1 : 0;
  void* args[] = {&src, &dst, &count, &bf16, &e1, &e2, &e3, &s0, &s1, &s2, &s3};
  LaunchConfig cfg;
  cfg.grid = {static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 8192)), 1, 1};
  cfg.block = {256, 1, 1};
  cfg.stream = s;
  launch(fn, cfg, args);
}

} // namespace

void convert_f32(CUdeviceptr src, CUdeviceptr dst, int64_t n, DType dtype, CUstream s) {
  if (dtype == DType::f32) {
    TILEPILOT_CU(driver().cuMemcpyDtoDAsync(dst, src, size_t(n) * 4, s));
    return;
  }
  launch_convert(src, dst, n, dtype, {1, 1, std::max<int64_t>(n, 1)}, {0, 0, 0, 1}, s);
}

void convert_f32_to_view(CUdeviceptr src, CUdeviceptr dst, const std::array<int64_t, 4>& shape,
                         const std::array<int64_t, 4>& strides, DType dtype, CUstream s) {
  internal_assert(dtype == DType::bf16 || dtype == DType::f16)
      << "convert_f32_to_view writes bf16 or f16, not " << dtype_name(dtype);
  const int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
  if (n == 0) return;
  launch_convert(src, dst, n, dtype, {shape[1], shape[2], shape[3]}, strides, s);
}

} // namespace tp::rt
