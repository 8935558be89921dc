// The torch-eager SwiGLU as CUDA C++ kernels, the two torch launches:
//   eager_silu  a = dtype(g / (1 + exp(-g)))   over the gate half (a strided view in torch);
//               the intermediate [T, I] is in the dtype, as torch stores it
//   eager_mul   out = dtype(a * u)             u the up half
#include "ops/swiglu/SwiGluFramework.h"

#include <algorithm>
#include <map>

#include "ops/swiglu/SwiGlu.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "tilepilot/error.h"

namespace tp::ops::swiglu {

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

const char* kKernels = R"(
// Row t of gu holds gate in [0, I) and up in [I, 2I).
extern "C" __global__ void eager_silu(const T* gu, T* a, int I, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float g = ld(gu[(i / I) * 2 * I + i % I]);
    a[i] = st(g / (1.0f + expf(-g)));
  }
}

extern "C" __global__ void eager_mul(const T* a, const T* gu, T* out, int I, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    out[i] = st(ld(a[i]) * ld(gu[(i / I) * 2 * I + I + i % I]));
}
)";

const char* kEntries[] = {"eager_silu", "eager_mul"};

std::string source(DType t) {
  return std::string("// TilePilot torch-eager swiglu\n#define TP_DTYPE_BF16 ") +
         (t == DType::bf16 ? "1" : "0") + "\n#define TP_DTYPE_F32 " +
         (t == DType::f32 ? "1" : "0") + "\n" + kPrelude + kKernels;
}

std::string canonical(DType t) {
  return std::string("framework swiglu ") + dtype_name(t);
}

CUfunction load(const char* entry, DType t) {
  static std::map<std::pair<std::string, DType>, CUfunction> cache;
  auto key = std::make_pair(std::string(entry), t);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  // One module holds both kernels; its cache key leaves the entry out, so the second entry
  // loads the same cubin.
  rt::JitKernel k = rt::jit_load(source(t), entry, canonical(t), current_arch(), {});
  return cache[key] = k.fn;
}

/// An elementwise launch: 256 threads, a grid-stride loop over at most 2^16 blocks.
rt::LaunchConfig elementwise(int64_t n, Stream s) {
  rt::LaunchConfig c;
  c.grid = {static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536)), 1, 1};
  c.block = {256, 1, 1};
  c.stream = s;
  return c;
}

class SwiGluEager : public Framework {
public:
  explicit SwiGluEager(const Problem& p)
      : p_(p), a_(static_cast<size_t>(dtype_bytes(p.dtype)) * p.at("T") * p.at("I")) {
    for (const char* e : kEntries)
      load(e, p.dtype); // compile now, not inside a timed run
  }
  std::string name() const override { return kFrameworkName; }
  void run(const std::vector<DeviceTensor>& args, Stream stream) override {
    if (args.size() != 2)
      user_error() << "swiglu framework: takes 2 tensors (gu, out), got " << args.size();
    for (const DeviceTensor& t : args)
      if (!t.contiguous()) user_error() << "swiglu framework: every tensor must be contiguous";
    int I = static_cast<int>(p_.at("I"));
    long long n = p_.at("T") * p_.at("I");
    CUdeviceptr gu = args[0].ptr, out = args[1].ptr, a = a_.ptr();
    void* a1[] = {&gu, &a, &I, &n};
    rt::launch(load("eager_silu", p_.dtype), elementwise(n, stream), a1);
    void* a2[] = {&a, &gu, &out, &I, &n};
    rt::launch(load("eager_mul", p_.dtype), elementwise(n, stream), a2);
  }

private:
  Problem p_;
  rt::DeviceBuffer a_; // silu(gate) [T, I] in the dtype
};

} // namespace

std::unique_ptr<Framework> make_framework(const Problem& p) {
  std::string why;
  if (!gpu_available(&why)) user_error() << "swiglu framework: no GPU to run on: " << why;
  return std::make_unique<SwiGluEager>(p);
}

std::vector<std::string> compile_framework(const std::string& arch) {
  std::vector<std::string> done;
  for (DType t : {DType::bf16, DType::f16, DType::f32}) {
    rt::jit_compile_only(source(t), "swiglu_eager", canonical(t), arch, {});
    for (const char* e : kEntries)
      done.push_back(std::string(e) + " " + dtype_name(t));
  }
  return done;
}

} // namespace tp::ops::swiglu
