// The GPU references: kernel sources, compilation through jit_load, launches and downloads.
//
// Gemm: a 16x16 shared-memory tiled kernel, one output per thread, fmaf in k order.
// Attention: one block of 256 threads per (16 query rows, head, batch); thread (r, c) = (t / 16,
// t % 16) owns row r. Keys stream through shared memory 32 at a time. Pass 1 finds each row's
// max scaled score; pass 2 recomputes the scores identically, p = exp(s - max), accumulates
// l = sum p and o = sum p v in registers (thread c owns d = c, c + 16, ...), then O = o / l.
#include "ops/reference/GpuReference.h"

#include <cstdint>
#include <fmt/format.h>
#include <map>

#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace tp::ops {

namespace {

/// Input decoding shared by both kernels: raw 16-bit words, widened exactly.
const char* kDecode = R"(
typedef unsigned short u16;
#define TP_NEG_INF __int_as_float(0xff800000)
__device__ __forceinline__ float to_f(u16 x) {
#if TP_REF_BF16
  return __uint_as_float(((unsigned)x) << 16);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
#endif
}
)";

const char* kGemm = R"(
// layout: 0 nn (A[M,K], B[K,N]), 1 nt (B[N,K]), 2 tn (A[K,M]).
extern "C" __global__ void ref_gemm(const u16* A, const u16* B, float* C, long long M,
                                    long long N, long long K, int layout) {
  __shared__ float As[16][17], Bs[16][17];
  int tx = threadIdx.x, ty = threadIdx.y;
  long long row = (long long)blockIdx.y * 16 + ty, col = (long long)blockIdx.x * 16 + tx;
  float acc = 0.0f;
  for (long long k0 = 0; k0 < K; k0 += 16) {
    long long ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (row < M && ka < K) ? to_f(layout == 2 ? A[ka * M + row] : A[row * K + ka]) : 0.0f;
    Bs[ty][tx] = (kb < K && col < N) ? to_f(layout == 1 ? B[col * K + kb] : B[kb * N + col]) : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < 16; ++kk) acc = fmaf(As[ty][kk], Bs[kk][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
)";

const char* kAttention = R"(
#define ROWS 16
#define KT 32
extern "C" __global__ void __launch_bounds__(256)
ref_attention(const u16* Q, const u16* K, const u16* V, float* O, float* LSE, const int* lens,
              int H, int Hkv, int S, int Skv, int D, int causal, int has_lens, int has_lse,
              float scale, long long qs0, long long qs1, long long qs2, long long ks0,
              long long ks1, long long ks2, long long vs0, long long vs1, long long vs2) {
  extern __shared__ float smem[];
  float* Qs = smem;                 // ROWS x D
  float* KVs = Qs + ROWS * D;       // KT x (D + 1): K tile, then V tile (padded: no conflicts)
  float* Ps = KVs + KT * (D + 1);   // ROWS x KT probabilities
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * ROWS;
  const int hk = h / (H / Hkv);
  const int t = threadIdx.x, r = t / 16, c = t % 16, i = i0 + r;
  const int L = has_lens ? lens[b] : Skv;
  // One past the last visible key: j < L and, causal, j <= i + L - S (bottom-right aligned).
  int last = i < S ? L : 0;
  if (causal && i < S) last = min(L, max(0, i + L - S + 1));
  int block_last = L;
  if (causal) block_last = min(L, max(0, min(i0 + ROWS, S) - 1 + L - S + 1));
  const u16* Kb = K + b * ks0 + hk * ks1;
  const u16* Vb = V + b * vs0 + hk * vs1;

  for (int idx = t; idx < ROWS * D; idx += 256) {
    int rr = idx / D, dd = idx % D;
    Qs[idx] = i0 + rr < S ? to_f(Q[b * qs0 + h * qs1 + (long long)(i0 + rr) * qs2 + dd]) : 0.0f;
  }
  __syncthreads();

  // Pass 1: the row max of the scaled scores over visible keys.
  float m = TP_NEG_INF;
  for (int j0 = 0; j0 < block_last; j0 += KT) {
    for (int idx = t; idx < KT * D; idx += 256) {
      int jj = idx / D, dd = idx % D, j = j0 + jj;
      KVs[jj * (D + 1) + dd] = j < Skv ? to_f(Kb[(long long)j * ks2 + dd]) : 0.0f;
    }
    __syncthreads();
    for (int jj = c; jj < KT; jj += 16) {
      if (j0 + jj >= last) continue;
      float s = 0.0f;
      for (int d = 0; d < D; ++d) s = fmaf(Qs[r * D + d], KVs[jj * (D + 1) + d], s);
      m = fmaxf(m, s * scale);
    }
    __syncthreads();
  }
  for (int off = 8; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));

  // Pass 2: p = exp(s - max), l = sum p, o = sum p v.
  const int nd = D / 16;
  float acc[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) acc[k] = 0.0f;
  float l = 0.0f;
  for (int j0 = 0; j0 < block_last; j0 += KT) {
    for (int idx = t; idx < KT * D; idx += 256) {
      int jj = idx / D, dd = idx % D, j = j0 + jj;
      KVs[jj * (D + 1) + dd] = j < Skv ? to_f(Kb[(long long)j * ks2 + dd]) : 0.0f;
    }
    __syncthreads();
    for (int jj = c; jj < KT; jj += 16) {
      float p = 0.0f;
      if (j0 + jj < last) {
        float s = 0.0f;
        for (int d = 0; d < D; ++d) s = fmaf(Qs[r * D + d], KVs[jj * (D + 1) + d], s);
        p = expf(s * scale - m);
      }
      Ps[r * KT + jj] = p;
      l += p;
    }
    __syncthreads();
    for (int idx = t; idx < KT * D; idx += 256) {
      int jj = idx / D, dd = idx % D, j = j0 + jj;
      KVs[jj * (D + 1) + dd] = j < Skv ? to_f(Vb[(long long)j * vs2 + dd]) : 0.0f;
    }
    __syncthreads();
    for (int jj = 0; jj < KT; ++jj) {
      float p = Ps[r * KT + jj];
#pragma unroll
      for (int k = 0; k < 16; ++k)
        if (k < nd) acc[k] = fmaf(p, KVs[jj * (D + 1) + c + 16 * k], acc[k]);
    }
    __syncthreads();
  }
  for (int off = 8; off > 0; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
  if (i >= S) return;
  long long row = ((long long)b * H + h) * S + i;
#pragma unroll
  for (int k = 0; k < 16; ++k)
    if (k < nd) O[row * D + c + 16 * k] = l > 0.0f ? acc[k] / l : 0.0f;
  if (has_lse && c == 0) LSE[row] = l > 0.0f ? m + logf(l) : TP_NEG_INF;
}
)";

const std::string& device_arch() {
  static const std::string arch = [] {
    std::string why;
    auto info = rt::device_info(rt::selected_device_ordinal(), &why);
    if (!info) user_error() << "GPU reference: no GPU to run on: " << why;
    return info->arch;
  }();
  return arch;
}

std::string source(const char* body, DType dtype) {
  return std::string("// TilePilot GPU reference\n#define TP_REF_BF16 ") +
         (dtype == DType::bf16 ? "1" : "0") + "\n" + kDecode + body;
}

std::string canonical(const char* entry, DType dtype) {
  return std::string("reference ") + entry + " " + dtype_name(dtype);
}

CUfunction load(const char* body, const char* entry, DType dtype) {
  static std::map<std::pair<std::string, DType>, CUfunction> cache;
  auto key = std::make_pair(std::string(entry), dtype);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  rt::JitKernel k =
      rt::jit_load(source(body, dtype), entry, canonical(entry, dtype), device_arch(), {});
  return cache[key] = k.fn;
}

void check_dtype(DType t, const char* who) {
  if (t != DType::bf16 && t != DType::f16)
    user_error() << who << ": dtype " << dtype_name(t) << " is not supported; use bf16 or f16";
}

} // namespace

void gpu_reference_gemm(DType dtype, const std::string& layout, int64_t M, int64_t N, int64_t K,
                        CUdeviceptr A, CUdeviceptr B, CUdeviceptr C, CUstream stream) {
  const char* who = "GPU reference gemm";
  check_dtype(dtype, who);
  int lay = layout == "nn" ? 0 : layout == "nt" ? 1 : layout == "tn" ? 2 : -1;
  if (lay < 0) user_error() << who << ": layout '" << layout << "' is not one of nn, nt, tn";
  if (M <= 0 || N <= 0 || K <= 0)
    user_error() << who << ": M=" << M << ", N=" << N << ", K=" << K << " must be positive";
  if ((M + 15) / 16 > 65535)
    user_error() << who << ": M=" << M << " exceeds the grid limit (" << 65535 * 16 << " rows)";
  if (!A || !B || !C) user_error() << who << ": null device pointer (A, B or C)";
  CUfunction fn = load(kGemm, "ref_gemm", dtype);
  long long m = M, n = N, k = K;
  void* args[] = {&A, &B, &C, &m, &n, &k, &lay};
  rt::LaunchConfig cfg;
  cfg.grid = {static_cast<unsigned>((N + 15) / 16), static_cast<unsigned>((M + 15) / 16), 1};
  cfg.block = {16, 16, 1};
  cfg.stream = stream;
  rt::launch(fn, cfg, args);
}

void gpu_reference_attention(const AttentionDesc& d, const AttentionPtrs& p, CUstream stream) {
  const char* who = "GPU reference attention";
  validate_attention_desc(d, who);
  validate_attention_ptrs(d, p, who);
  if (d.D % 16 || d.D > 256)
    user_error() << who << ": D=" << d.D << " is not supported; use a multiple of 16 up to 256";
  if (d.H > 65535 || d.B > 65535)
    user_error() << who << ": H=" << d.H << " and B=" << d.B << " must be at most 65535";
  if (d.S > INT32_MAX || d.Skv > INT32_MAX)
    user_error() << who << ": S and Skv must fit in 32 bits";
  CUfunction fn = load(kAttention, "ref_attention", d.dtype);
  auto qs = d.q_strides(), ks = d.k_strides(), vs = d.v_strides();
  int H = int(d.H), Hkv = int(d.Hkv), S = int(d.S), Skv = int(d.Skv), D = int(d.D);
  int causal = d.causal, has_lens = d.lens, has_lse = d.lse;
  float scale = static_cast<float>(d.effective_scale());
  long long q0 = qs[0], q1 = qs[1], q2 = qs[2], k0 = ks[0], k1 = ks[1], k2 = ks[2];
  long long v0 = vs[0], v1 = vs[1], v2 = vs[2];
  CUdeviceptr q = p.q, k = p.k, v = p.v, o = p.o, lse = p.lse, lens = p.lens;
  void* args[] = {&q,        &k,       &v,     &o,  &lse, &lens, &H,  &Hkv, &S,  &Skv, &D,  &causal,
                  &has_lens, &has_lse, &scale, &q0, &q1,  &q2,   &k0, &k1,  &k2, &v0,  &v1, &v2};
  rt::LaunchConfig cfg;
  cfg.grid = {static_cast<unsigned>((d.S + 15) / 16), static_cast<unsigned>(d.H),
              static_cast<unsigned>(d.B)};
  cfg.block = {256, 1, 1};
  cfg.shared_bytes = static_cast<unsigned>((16 * D + 32 * (D + 1) + 16 * 32) * sizeof(float));
  cfg.stream = stream;
  rt::launch(fn, cfg, args);
}

std::vector<std::string> compile_gpu_references(const std::string& arch) {
  std::vector<std::string> done;
  for (DType t : {DType::bf16, DType::f16})
    for (auto [body, entry] : {std::pair{kGemm, "ref_gemm"}, {kAttention, "ref_attention"}}) {
      rt::jit_compile_only(source(body, t), entry, canonical(entry, t), arch, {});
      done.push_back(std::string(entry) + " " + dtype_name(t));
    }
  return done;
}

std::vector<float> download_f32(CUdeviceptr src, size_t count) {
  return download_as_f32(src, count, DType::f32);
}

std::vector<float> download_as_f32(CUdeviceptr src, size_t count, DType dtype) {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    user_error() << "download_as_f32: dtype " << dtype_name(dtype)
                 << " is not supported; use f32, bf16 or f16";
  std::vector<float> out(count);
  if (count == 0) return out;
  rt::ensure_context();
  if (dtype == DType::f32) {
    TILEPILOT_CU(rt::driver().cuMemcpyDtoH(out.data(), src, count * sizeof(float)));
    return out;
  }
  std::vector<uint16_t> bits(count);
  TILEPILOT_CU(rt::driver().cuMemcpyDtoH(bits.data(), src, count * sizeof(uint16_t)));
  for (size_t i = 0; i < count; ++i)
    out[i] = dtype == DType::bf16 ? bf16_bits_to_float(bits[i]) : half_bits_to_float(bits[i]);
  return out;
}

} // namespace tp::ops
