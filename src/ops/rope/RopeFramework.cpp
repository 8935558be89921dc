// The torch-eager RoPE as CUDA C++ kernels. HF computes
//   freqs = inv_freq (f32 buffer) x position_ids.float(); emb = cat(freqs, freqs)
//   cos = emb.cos().to(dtype); sin = emb.sin().to(dtype)
//   q_out = q * cos + rotate_half(q) * sin, each op rounded to the dtype (and the same for k)
// which these kernels do launch for launch, except that cos and sin share one kernel and
// rotate_half (torch: a negation and a cat) is one:
//   eager_cos_sin      cos, sin [T, D] in the dtype
//   eager_rotate_half  rh = cat(-x[..., D/2:], x[..., :D/2])
//   eager_mul_bcast    x * cos, rh * sin (cos, sin broadcast over heads)
//   eager_add          the sum
// A model computes cos and sin once per forward and passes them to every layer; this operator
// (like ours) computes them per call.
#include "ops/rope/RopeFramework.h"

#include <algorithm>

#include "ops/reference/EagerChain.h"
#include "ops/rope/Rope.h"
#include "runtime/DeviceBuffer.h"
#include "tilepilot/error.h"

namespace tp::ops::rope {

namespace {

const char* kKernels = R"(
#define GRID_STRIDE(i, n) \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; \
       i += (long long)gridDim.x * blockDim.x)

// n = T * D; column j uses frequency j % (D / 2).
extern "C" __global__ void eager_cos_sin(const int* pos, const float* inv_freq, T* cs, T* sn,
                                         int D, long long n) {
  GRID_STRIDE(i, n) {
    float f = (float)pos[i / D] * inv_freq[(i % D) % (D / 2)];
    cs[i] = st(cosf(f));
    sn[i] = st(sinf(f));
  }
}

extern "C" __global__ void eager_rotate_half(const T* x, T* rh, int D, long long n) {
  GRID_STRIDE(i, n) {
    int j = (int)(i % D), h = D / 2;
    rh[i] = j < h ? st(-ld(x[i + h])) : x[i - h];
  }
}

// x [T, heads, D] times c [T, D] broadcast over heads: hd = heads * D.
extern "C" __global__ void eager_mul_bcast(const T* x, const T* c, T* out, long long hd, int D,
                                           long long n) {
  GRID_STRIDE(i, n) out[i] = st(ld(x[i]) * ld(c[(i / hd) * D + i % D]));
}

extern "C" __global__ void eager_add(const T* a, const T* b, T* out, long long n) {
  GRID_STRIDE(i, n) out[i] = st(ld(a[i]) + ld(b[i]));
}
)";

const EagerChain& eager() {
  static const EagerChain chain("rope", "framework rope", "rope_eager", kKernels);
  return chain;
}

const char* kEntries[] = {"eager_cos_sin", "eager_rotate_half", "eager_mul_bcast", "eager_add"};

class RopeEager : public Framework {
public:
  explicit RopeEager(const Problem& p) : p_(p) {
    const int64_t T = p.at("T"), D = p.at("D"), big = T * std::max(p.at("H"), p.at("Hkv")) * D;
    const size_t e = static_cast<size_t>(dtype_bytes(p.dtype));
    // HF's inv_freq buffer: computed once on the host in f32, as the module's __init__ does.
    inv_freq_ =
        rt::DeviceBuffer::from(inv_freq_f32(D, static_cast<float>(p.at("base")), llama3_scaled(p)));
    cos_ = rt::DeviceBuffer(e * T * D);
    sin_ = rt::DeviceBuffer(e * T * D);
    for (rt::DeviceBuffer* b : {&rh_, &m1_, &m2_})
      *b = rt::DeviceBuffer(e * big);
    for (const char* name : kEntries)
      eager().fn(name, p.dtype); // compile now, not inside a timed run
  }
  std::string name() const override { return kFrameworkName; }
  void run(const std::vector<DeviceTensor>& a, Stream stream) override {
    if (a.size() != 5)
      user_error() << "rope framework: takes 5 tensors (q, k, pos, q_out, k_out), got " << a.size();
    for (const DeviceTensor& t : a)
      if (!t.contiguous()) user_error() << "rope framework: every tensor must be contiguous";
    const DType dt = p_.dtype;
    int D = static_cast<int>(p_.at("D"));
    long long td = p_.at("T") * p_.at("D");
    CUdeviceptr pos = a[2].ptr, inv = inv_freq_.ptr(), cs = cos_.ptr(), sn = sin_.ptr();
    void* a0[] = {&pos, &inv, &cs, &sn, &D, &td};
    rt::launch(eager().fn("eager_cos_sin", dt), eager_launch(td, stream), a0);
    CUdeviceptr rh = rh_.ptr(), m1 = m1_.ptr(), m2 = m2_.ptr();
    for (int which = 0; which < 2; ++which) {
      CUdeviceptr x = a[which].ptr, out = a[3 + which].ptr;
      long long hd = (which == 0 ? p_.at("H") : p_.at("Hkv")) * p_.at("D");
      long long n = p_.at("T") * hd;
      void* r[] = {&x, &rh, &D, &n};
      rt::launch(eager().fn("eager_rotate_half", dt), eager_launch(n, stream), r);
      void* c1[] = {&x, &cs, &m1, &hd, &D, &n};
      rt::launch(eager().fn("eager_mul_bcast", dt), eager_launch(n, stream), c1);
      void* c2[] = {&rh, &sn, &m2, &hd, &D, &n};
      rt::launch(eager().fn("eager_mul_bcast", dt), eager_launch(n, stream), c2);
      void* s[] = {&m1, &m2, &out, &n};
      rt::launch(eager().fn("eager_add", dt), eager_launch(n, stream), s);
    }
  }

private:
  Problem p_;
  rt::DeviceBuffer inv_freq_, cos_, sin_; // [D/2] f32; [T, D] in the dtype
  rt::DeviceBuffer rh_, m1_, m2_;         // rotate_half(x), x * cos, rh * sin: [T, H, D]
};

} // namespace

std::unique_ptr<Framework> make_framework(const Problem& p) {
  std::string why;
  if (!gpu_available(&why)) user_error() << "rope framework: no GPU to run on: " << why;
  return std::make_unique<RopeEager>(p);
}

std::vector<std::string> compile_framework(const std::string& arch) {
  std::vector<std::string> done;
  for (DType t : {DType::bf16, DType::f16}) {
    eager().compile_only(t, arch);
    for (const char* e : kEntries)
      done.push_back(std::string(e) + " " + dtype_name(t));
  }
  return done;
}

} // namespace tp::ops::rope
