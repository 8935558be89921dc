// The torch-eager decode attention as CUDA C++ kernels. A vLLM or HF user without a fused
// decode kernel runs SDPA's math path over the cache:
//   da_gather   (paged only) the sequence's pages into contiguous k, v [B, Hkv, L, D]
//   da_scores   s = q k^T * scale in f32 [B, H, Sq, L], -inf where a key is not visible
//   da_softmax  p = softmax(s) over the keys, rounded to the dtype (torch casts P for P v)
//   da_pv       out = p v, f32 accumulation, rounded to the dtype
// Grouped heads index the KV head h / (H / Hkv) instead of materialising repeat_interleave.
// A token that sees no key (an empty sequence) gets p = 0 and out = 0, where torch would give
// NaN: the operator defines that output as 0.
#include "ops/decode_attention/DecodeAttentionFramework.h"

#include <algorithm>
#include <cmath>

#include "ops/decode_attention/DecodeAttention.h"
#include "ops/reference/EagerChain.h"
#include "runtime/DeviceBuffer.h"
#include "tilepilot/error.h"

namespace tp::ops::decode_attention {

namespace {

const char* kKernels = R"(
#define NEG_INF __int_as_float(0xff800000)
#define GRID_STRIDE(i, n) \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; \
       i += (long long)gridDim.x * blockDim.x)

// dst [B, Hkv, L, D] from cache [pages, Hkv, block, D] through table [B, MB]; n = B Hkv L D.
extern "C" __global__ void da_gather(const int* table, const T* cache, T* dst, int Hkv, int block,
                                     int MB, int L, int D, long long n) {
  GRID_STRIDE(i, n) {
    long long r = i / D;
    int d = (int)(i % D), j = (int)(r % L);
    long long bh = r / L;
    int hk = (int)(bh % Hkv);
    long long b = bh / Hkv;
    long long page = table[b * MB + j / block];
    dst[i] = cache[((page * Hkv + hk) * block + j % block) * D + d];
  }
}

// s [B, H, Sq, L]; lens null: every sequence is L long. n = B H Sq L.
extern "C" __global__ void da_scores(const T* q, const T* k, const int* lens, float* s, int H,
                                     int Hkv, int Sq, int L, int D, float scale, long long n) {
  GRID_STRIDE(i, n) {
    int j = (int)(i % L);
    long long row = i / L;
    int t = (int)(row % Sq), h = (int)(row / Sq % H);
    long long b = row / Sq / H;
    int len = lens ? lens[b] : L;
    if (j < len - Sq + t + 1) {
      const T* qr = q + row * D;
      const T* kr = k + ((b * Hkv + h / (H / Hkv)) * L + j) * D;
      float acc = 0.f;
      for (int e = 0; e < D; ++e) acc += ld(qr[e]) * ld(kr[e]);
      s[i] = acc * scale;
    } else {
      s[i] = NEG_INF;
    }
  }
}

// One block of 256 threads per row of L scores.
extern "C" __global__ void da_softmax(const float* s, T* p, int L) {
  __shared__ float red[256];
  const float* sr = s + (long long)blockIdx.x * L;
  T* pr = p + (long long)blockIdx.x * L;
  float mx = NEG_INF;
  for (int j = threadIdx.x; j < L; j += blockDim.x) mx = fmaxf(mx, sr[j]);
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  float sum = 0.f;
  if (mx != NEG_INF)
    for (int j = threadIdx.x; j < L; j += blockDim.x) sum += __expf(sr[j] - mx);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  sum = red[0];
  for (int j = threadIdx.x; j < L; j += blockDim.x)
    pr[j] = st(sum > 0.f ? __expf(sr[j] - mx) / sum : 0.f);
}

// out [B, H, Sq, D] = p [B, H, Sq, L] v [B, Hkv, L, D]; n = B H Sq D.
extern "C" __global__ void da_pv(const T* p, const T* v, T* out, int H, int Hkv, int Sq, int L,
                                 int D, long long n) {
  GRID_STRIDE(i, n) {
    int d = (int)(i % D);
    long long row = i / D;
    int h = (int)(row / Sq % H);
    long long b = row / Sq / H;
    const T* pr = p + row * L;
    const T* vr = v + (b * Hkv + h / (H / Hkv)) * (long long)L * D + d;
    float acc = 0.f;
    for (int j = 0; j < L; ++j) acc += ld(pr[j]) * ld(vr[(long long)j * D]);
    out[i] = st(acc);
  }
}
)";

const EagerChain& eager() {
  static const EagerChain chain("decode attention", "framework decode_attention",
                                "decode_attention_eager", kKernels);
  return chain;
}

const char* kEntries[] = {"da_gather", "da_scores", "da_softmax", "da_pv"};

class DecodeEager : public Framework {
public:
  explicit DecodeEager(const Problem& p) : p_(p) {
    const int64_t B = p.at("B"), H = p.at("H"), Hkv = p.at("Hkv"), Sq = p.at("Sq");
    const int64_t D = p.at("D"), L = cache_len();
    const size_t e = static_cast<size_t>(dtype_bytes(p.dtype));
    s_ = rt::DeviceBuffer(4 * static_cast<size_t>(B * H * Sq * L));
    pr_ = rt::DeviceBuffer(e * static_cast<size_t>(B * H * Sq * L));
    if (paged(p)) {
      kbuf_ = rt::DeviceBuffer(e * static_cast<size_t>(B * Hkv * L * D));
      vbuf_ = rt::DeviceBuffer(e * static_cast<size_t>(B * Hkv * L * D));
    }
    for (const char* name : kEntries)
      eager().fn(name, p.dtype); // compile now, not inside a timed run
  }
  std::string name() const override { return kFrameworkName; }
  void run(const std::vector<DeviceTensor>& a, Stream stream) override {
    const size_t want = static_cast<size_t>(out_index(p_) + 1);
    if (a.size() != want)
      user_error() << "decode_attention framework: takes " << want << " tensors, got " << a.size();
    for (const DeviceTensor& t : a)
      if (!t.contiguous())
        user_error() << "decode_attention framework: every tensor must be contiguous";
    const DType dt = p_.dtype;
    int H = static_cast<int>(p_.at("H")), Hkv = static_cast<int>(p_.at("Hkv"));
    int Sq = static_cast<int>(p_.at("Sq")), D = static_cast<int>(p_.at("D"));
    int L = static_cast<int>(cache_len());
    const long long B = p_.at("B");
    CUdeviceptr q = a[0].ptr, k = a[1].ptr, v = a[2].ptr, out = a[out_index(p_)].ptr;
    CUdeviceptr lens = has_lens(p_) ? a[lens_index(p_)].ptr : CUdeviceptr{0};
    if (paged(p_)) {
      CUdeviceptr table = a[3].ptr, kb = kbuf_.ptr(), vb = vbuf_.ptr();
      int block = static_cast<int>(p_.at("block")), MB = static_cast<int>(pages_per_seq(p_));
      long long n = B * Hkv * L * D;
      void* gk[] = {&table, &k, &kb, &Hkv, &block, &MB, &L, &D, &n};
      rt::launch(eager().fn("da_gather", dt), eager_launch(n, stream), gk);
      void* gv[] = {&table, &v, &vb, &Hkv, &block, &MB, &L, &D, &n};
      rt::launch(eager().fn("da_gather", dt), eager_launch(n, stream), gv);
      k = kb;
      v = vb;
    }
    CUdeviceptr s = s_.ptr(), pr = pr_.ptr();
    float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    long long ns = B * H * Sq * L;
    void* sa[] = {&q, &k, &lens, &s, &H, &Hkv, &Sq, &L, &D, &scale, &ns};
    rt::launch(eager().fn("da_scores", dt), eager_launch(ns, stream), sa);
    rt::LaunchConfig rows;
    rows.grid = {static_cast<unsigned>(B * H * Sq), 1, 1};
    rows.block = {256, 1, 1};
    rows.stream = stream;
    void* sm[] = {&s, &pr, &L};
    rt::launch(eager().fn("da_softmax", dt), rows, sm);
    long long no = B * H * Sq * D;
    void* pv[] = {&pr, &v, &out, &H, &Hkv, &Sq, &L, &D, &no};
    rt::launch(eager().fn("da_pv", dt), eager_launch(no, stream), pv);
  }

private:
  /// The keys the chain runs over: L, or every page of the block table when paged.
  int64_t cache_len() const { return paged(p_) ? pages_per_seq(p_) * p_.at("block") : p_.at("L"); }
  Problem p_;
  rt::DeviceBuffer s_, pr_;      // scores f32 and probabilities in the dtype, [B, H, Sq, L]
  rt::DeviceBuffer kbuf_, vbuf_; // paged: the gathered cache [B, Hkv, L, D]
};

} // namespace

std::unique_ptr<Framework> make_framework(const Problem& p) {
  std::string why;
  if (!gpu_available(&why)) user_error() << "decode_attention framework: no GPU to run on: " << why;
  return std::make_unique<DecodeEager>(p);
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

} // namespace tp::ops::decode_attention
