// The torch-eager SwiGLU as CUDA C++ kernels, the two torch launches:
//   eager_silu  a = dtype(g / (1 + exp(-g)))   over the gate half (a strided view in torch);
//               the intermediate [T, I] is in the dtype, as torch stores it
//   eager_mul   out = dtype(a * u)             u the up half
#include "ops/swiglu/SwiGluFramework.h"

#include <algorithm>

#include "ops/reference/EagerChain.h"
#include "ops/swiglu/SwiGlu.h"
#include "runtime/DeviceBuffer.h"
#include "tilepilot/error.h"

namespace tp::ops::swiglu {

namespace {

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

const EagerChain& eager() {
  static const EagerChain chain("swiglu", "framework swiglu", "swiglu_eager", kKernels);
  return chain;
}

const char* kEntries[] = {"eager_silu", "eager_mul"};

class SwiGluEager : public Framework {
public:
  explicit SwiGluEager(const Problem& p)
      : p_(p), a_(static_cast<size_t>(dtype_bytes(p.dtype)) * p.at("T") * p.at("I")) {
    for (const char* e : kEntries)
      eager().fn(e, p.dtype); // compile now, not inside a timed run
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
    rt::launch(eager().fn("eager_silu", p_.dtype), eager_launch(n, stream), a1);
    void* a2[] = {&a, &gu, &out, &I, &n};
    rt::launch(eager().fn("eager_mul", p_.dtype), eager_launch(n, stream), a2);
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
    eager().compile_only(t, arch);
    for (const char* e : kEntries)
      done.push_back(std::string(e) + " " + dtype_name(t));
  }
  return done;
}

} // namespace tp::ops::swiglu
