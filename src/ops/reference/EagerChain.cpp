// EagerChain (EagerChain.h).
#include "ops/reference/EagerChain.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "runtime/Jit.h"

namespace tp::ops {

namespace {

/// Loads and stores of the element type T, computing in f32; stores round to nearest even.
const char* kPrelude = R"(
#if TP_DTYPE_F32
typedef float T;
__device__ __forceinline__ float ld(T x) { return x; }
__device__ __forceinline__ T st(float f) { return f; }
#else
typedef unsigned short T;
__device__ __forceinline__ float ld(T x) {
#if TP_DTYPE_BF16
  return __uint_as_float(((unsigned)x) << 16);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
#endif
}
__device__ __forceinline__ T st(float f) {
  T r;
#if TP_DTYPE_BF16
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
#else
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
#endif
  return r;
}
#endif
)";

} // namespace

EagerChain::EagerChain(std::string banner, std::string cache_name, std::string program,
                       const char* kernels)
    : banner_(std::move(banner)), cache_name_(std::move(cache_name)), program_(std::move(program)),
      kernels_(kernels) {}

std::string EagerChain::source(DType t) const {
  return "// TilePilot torch-eager " + banner_ + "\n#define TP_DTYPE_BF16 " +
         (t == DType::bf16 ? "1" : "0") + "\n#define TP_DTYPE_F32 " +
         (t == DType::f32 ? "1" : "0") + "\n" + kPrelude + kernels_;
}

CUfunction EagerChain::fn(const char* entry, DType t) const {
  static std::mutex mu;
  static std::map<std::tuple<const EagerChain*, std::string, DType, std::string>, CUfunction>
      loaded;
  // The process's GPU is fixed (rt::selected_device_ordinal), so its arch is asked once: a
  // device query per launch cost 3-5 ms on the H200 (rmsnorm's chain at T=1 took 4.5 ms).
  static const std::string arch = current_arch();
  std::lock_guard<std::mutex> g(mu);
  CUfunction& f = loaded[{this, entry, t, arch}];
  // One module holds every kernel of the chain; its cache key leaves the entry out, so the
  // later entries load the same cubin.
  if (!f) f = rt::jit_load(source(t), entry, cache_name_ + " " + dtype_name(t), arch, {}).fn;
  return f;
}

void EagerChain::compile_only(DType t, const std::string& arch) const {
  rt::jit_compile_only(source(t), program_, cache_name_ + " " + dtype_name(t), arch, {});
}

rt::LaunchConfig eager_launch(int64_t n, Stream s) {
  rt::LaunchConfig c;
  c.grid = {static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 65536)), 1, 1};
  c.block = {256, 1, 1};
  c.stream = s;
  return c;
}

} // namespace tp::ops
