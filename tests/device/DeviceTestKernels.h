// CUDA sources (compiled at run time through NVRTC with the embedded device library) used by the
// device-library tests: the compile tests build them for sm_90a / sm_80 on any machine, the
// GpuDeviceLib tests run them on an H200. Each kernel checks one family of wrappers.
#pragma once

namespace tp::device_test {

/// Instantiates every sm_80-level wrapper once (compile-only; sm_80 and sm_90a).
inline const char* const kSm80AllWrappers = R"CUDA(
#include "tilepilot_device.cuh"
using namespace tp;

extern "C" __global__ void all_sm80(const bf16* g, float* out) {
  __shared__ alignas(128) unsigned char smem[4096];
  const uint32_t s = smem_u32(smem) + 16 * threadIdx.x;
  sm80::cp_async_16(s, g + 8 * threadIdx.x, threadIdx.x < 7 ? 16 : 0);
  sm80::cp_async_ca<4>(s + 1024, g, 2);
  sm80::cp_async_ca<8>(s + 2048, g);
  sm80::cp_async_commit();
  sm80::cp_async_wait<1>();
  sm80::cp_async_wait<0>();
  sm80::cp_async_wait_all();
  block::sync();
  uint32_t a[4], b[4], x1[1], x2[2];
  warp::ldmatrix_x4(a, s);
  warp::ldmatrix_x4_trans(b, s);
  warp::ldmatrix_x2(x2, s);
  warp::ldmatrix_x2_trans(x2, s);
  warp::ldmatrix_x1(x1, s);
  warp::ldmatrix_x1_trans(x1, s);
  float c[4] = {0.f, 0.f, 0.f, 0.f}, d[4];
  warp::mma_m16n8k16_bf16(d, a, {b[0], b[1]}, c);
  warp::mma_m16n8k16_f16(c, a, {b[2], b[3]}, d);
  float v = c[0] + c[1] + c[2] + c[3] + to_float(bf16{static_cast<uint16_t>(x1[0])}) +
            to_float(half{static_cast<uint16_t>(x2[1])});
  v = fast_exp2(v) + fast_rcp(v) + fast_rsqrt(v) + maxf(v, 1.f) + minf(v, 2.f);
  v += static_cast<float>(imax(static_cast<int>(v), 3) + imin(1, 2));
  v += warp::shfl_xor(v, 1) + warp::shfl_idx(v, 0) + warp::shfl_down(v, 2);
  v += static_cast<float>(warp::shfl_xor(static_cast<uint32_t>(v), 4) + warp::lane_id());
  v += to_float(low(to_bf16x2(v, 2.f * v))) + to_float(high(to_half2x(v, 3.f)));
  v += to_float(to_bf16(v)) + to_float(to_half(v));
  uint32_t q[4];
  sm80::ld_shared_v4(q, s);
  sm80::st_shared_v4(s + 16, q[0], q[1], q[2], q[3]);
  warp::sync();
  block::named_arrive(1, 64);
  block::named_sync(2, 128);
  out[threadIdx.x] = v + static_cast<float>(q[3]);
}
)CUDA";

/// Instantiates every sm_90 wrapper: all wgmma shapes/types (SS and RS), TMA 2d-4d loads and
/// stores, mbarrier, fences, setmaxnreg, stmatrix, clusters (compile-only; sm_90a).
inline const char* const kSm90AllWrappers = R"CUDA(
#include "tilepilot_device.cuh"
using namespace tp;

template <typename T, int N>
__global__ void __launch_bounds__(128) all_wgmma(float* out, uint64_t da, uint64_t db,
                                                 uint32_t a0, int sd) {
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  const uint32_t a[4] = {a0, a0 + 1, a0 + 2, a0 + 3};
  warpgroup::fence_operand(d);
  warpgroup::fence();
  warpgroup::mma_async_ss<T, N>(d, da, db, sd);
  warpgroup::mma_async_ss<T, N, 1, 1, -1, 1>(d, da, db);
  warpgroup::mma_async_rs<T, N, 1>(d, a, db, sd);
  warpgroup::mma_async_rs<T, N, 0, 1, -1>(d, a, db);
  warpgroup::commit_group();
  warpgroup::wait_group<1>();
  warpgroup::wait_group<0>();
  warpgroup::fence_operand(d);
  float s = 0.f;
  for (int i = 0; i < N / 2; ++i) s += d[i];
  out[threadIdx.x] = s;
}
#define TP_INSTANTIATE(N)                                                                    \
  template __global__ void all_wgmma<bf16, N>(float*, uint64_t, uint64_t, uint32_t, int);    \
  template __global__ void all_wgmma<half, N>(float*, uint64_t, uint64_t, uint32_t, int);
TP_INSTANTIATE(16)
TP_INSTANTIATE(32)
TP_INSTANTIATE(64)
TP_INSTANTIATE(96)
TP_INSTANTIATE(128)
TP_INSTANTIATE(192)
TP_INSTANTIATE(256)

extern "C" __global__ void __launch_bounds__(384) all_sm90(const __grid_constant__ TensorMap tm,
                                                            float* out) {
  __shared__ alignas(1024) unsigned char smem[32768];
  __shared__ alignas(8) uint64_t bar;
  const uint32_t s = smem_u32(smem), b = smem_u32(&bar);
  if (threadIdx.x == 0) {
    sm90::prefetch_tensormap(&tm);
    sm90::mbarrier_init(b, 1);
    sm90::fence_mbarrier_init();
  }
  block::sync();
  if (threadIdx.x < 32 && warp::elect_one()) {
    sm90::mbarrier_arrive_expect_tx(b, 3 * 8192);
    sm90::tma_load_2d(s, &tm, b, 0, 1);
    sm90::tma_load_3d(s + 8192, &tm, b, 0, 1, 2);
    sm90::tma_load_4d(s + 16384, &tm, b, 0, 1, 2, 3);
  }
  sm90::mbarrier_wait_parity(b, 0);
  const uint64_t da = sm90::make_smem_desc(smem, sm90::kDescSwizzle128B, 16, 1024);
  const uint64_t db = sm90::advance_smem_desc(da, 32);
  uint32_t a[4] = {1u, 2u, 3u, 4u};
  if (threadIdx.x < 128) {
    warpgroup::setmaxnreg_inc<232>();
    float d[64];
    for (int i = 0; i < 64; ++i) d[i] = 0.f;
    warpgroup::fence();
    warpgroup::mma_async_ss<bf16, 128>(d, da, db, 0);
    warpgroup::commit_group();
    warpgroup::wait_group<0>();
    warpgroup::acc_to_a_bf16(a, d, 1);
    uint32_t h[4];
    warpgroup::acc_to_a_f16(h, d, 2);
    a[3] += h[0];
  } else {
    warpgroup::setmaxnreg_dec<40>();
  }
  warp::stmatrix_x1(s, {a[0]});
  warp::stmatrix_x2(s, {a[0], a[1]});
  warp::stmatrix_x4(s, a);
  warp::stmatrix_x1_trans(s, {a[0]});
  warp::stmatrix_x2_trans(s, {a[0], a[1]});
  warp::stmatrix_x4_trans(s, a);
  sm90::fence_proxy_async_shared();
  sm90::fence_proxy_async();
  sm90::fence_acq_rel_cta();
  sm90::fence_acq_rel_cluster();
  sm90::fence_acq_rel_gpu();
  block::sync();
  if (threadIdx.x == 0) {
    sm90::tma_store_2d(&tm, 0, 1, s);
    sm90::tma_store_3d(&tm, 0, 1, 2, s);
    sm90::tma_store_4d(&tm, 0, 1, 2, 3, s);
    sm90::tma_store_commit();
    sm90::tma_store_wait_read<0>();
    sm90::tma_store_wait<0>();
    sm90::mbarrier_arrive(b);
    sm90::mbarrier_expect_tx(b, 16);
    sm90::mbarrier_arrive_cluster(sm90::mapa_shared(b, sm90::cluster_ctarank()));
    out[1] = static_cast<float>(sm90::cluster_nctarank()) +
             (sm90::mbarrier_try_wait_parity(b, 1, 100) ? 1.f : 0.f);
    sm90::mbarrier_inval(b);
  }
  sm90::cluster_arrive();
  sm90::cluster_wait();
  sm90::cluster_arrive_relaxed();
  sm90::cluster_wait();
  out[2] = static_cast<float>(a[0] + a[3]);
}
)CUDA";

/// GpuDeviceLib kernels for sm_90a: wgmma SS with TMA-loaded 128B-swizzled operands in each
/// major-ness, wgmma RS, an SS -> RS chain (the attention pattern), stmatrix + TMA store.
inline const char* const kWgmmaTests = R"CUDA(
#include "tilepilot_device.cuh"
using namespace tp;

// Dynamic shared memory rounded up to a 1024-byte boundary (128B-swizzle atoms).
__device__ uint32_t aligned_smem_base() {
  extern __shared__ unsigned char dyn_smem[];
  return (smem_u32(dyn_smem) + 1023u) & ~1023u;
}

// Descriptor of the k16 step `s` of a 128B-swizzled 16-bit operand (conventions: smem_desc.cuh).
// K-major: +32 B per step, SBO 1024. MN-major: +2048 B per step, LBO = slab stride, SBO 1024.
__device__ uint64_t operand_desc(uint32_t base, int mn_major, int s, int slab_bytes) {
  return sm90::encode_smem_desc(base + (mn_major ? 2048u : 32u) * s, sm90::kDescSwizzle128B,
                                mn_major ? slab_bytes : 16, 1024);
}

__device__ void store_acc(float* out, const float* d, int n, int count) {
  for (int r = 0; r < count; ++r) {
    const Coord c = sm90::wgmma_acc(threadIdx.x, r);
    out[c.row * n + c.col] = d[r];
  }
}

// D (64 x N, f32 row-major) = A (64 x 64) * B (64 x N), one warpgroup, 4 k16 steps.
// A: K-major = [m][k] in global, box {64 k, 64 m}; MN-major = [k][m], box {64 m, 64 k}.
// B: K-major = [n][k], box {64 k, N n}; MN-major = [k][n], N/64 boxes {64 n, 64 k} (slabs).
template <typename T, int N, int TransA, int TransB>
__device__ void wgmma_ss_tile(const TensorMap* tmA, const TensorMap* tmB, float* out) {
  const uint32_t sA = aligned_smem_base(), sB = sA + 8192, bar = sB + N * 128;
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(bar, 1);
    sm90::fence_mbarrier_init();
  }
  block::sync();
  if (threadIdx.x == 0) {
    sm90::mbarrier_arrive_expect_tx(bar, 8192 + N * 128);
    sm90::tma_load_2d(sA, tmA, bar, 0, 0);
    if (TransB) {
      for (int j = 0; j < N / 64; ++j) sm90::tma_load_2d(sB + 8192 * j, tmB, bar, 64 * j, 0);
    } else {
      sm90::tma_load_2d(sB, tmB, bar, 0, 0);
    }
  }
  sm90::mbarrier_wait_parity(bar, 0);
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  warpgroup::fence_operand(d);
  warpgroup::fence();
  for (int s = 0; s < 4; ++s)
    warpgroup::mma_async_ss<T, N, TransA, TransB>(d, operand_desc(sA, TransA, s, 8192),
                                                  operand_desc(sB, TransB, s, 8192), s > 0);
  warpgroup::commit_group();
  warpgroup::wait_group<0>();
  warpgroup::fence_operand(d);
  store_acc(out, d, N, N / 2);
}

#define TP_SS_KERNEL(name, T, N, TA, TB)                                                       \
  extern "C" __global__ void __launch_bounds__(128)                                          \
      name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,      \
           float* out) {                                                                      \
    wgmma_ss_tile<T, N, TA, TB>(&tmA, &tmB, out);                                             \
  }
TP_SS_KERNEL(wgmma_ss_bf16_kk_n64, bf16, 64, 0, 0)
TP_SS_KERNEL(wgmma_ss_f16_kk_n64, half, 64, 0, 0)
TP_SS_KERNEL(wgmma_ss_bf16_kn_n128, bf16, 128, 0, 1)
TP_SS_KERNEL(wgmma_ss_bf16_nn_n64, bf16, 64, 1, 1)
TP_SS_KERNEL(wgmma_ss_bf16_kk_n256, bf16, 256, 0, 0)

// RS: A (64 x 64 bf16, [m][k] in global) loaded into registers per wgmma_layout.cuh; B K-major
// through TMA (box {64 k, 64 n}).
extern "C" __global__ void __launch_bounds__(128)
    wgmma_rs_bf16_n64(const bf16* A, const __grid_constant__ TensorMap tmB, float* out) {
  const uint32_t sB = aligned_smem_base(), bar = sB + 8192;
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(bar, 1);
    sm90::fence_mbarrier_init();
  }
  block::sync();
  if (threadIdx.x == 0) {
    sm90::mbarrier_arrive_expect_tx(bar, 8192);
    sm90::tma_load_2d(sB, &tmB, bar, 0, 0);
  }
  uint32_t a[4][4];
  for (int s = 0; s < 4; ++s)
    for (int q = 0; q < 4; ++q) {
      const Coord lo = sm90::wgmma_a(threadIdx.x, 2 * q), hi = sm90::wgmma_a(threadIdx.x, 2 * q + 1);
      a[s][q] = pack(A[lo.row * 64 + 16 * s + lo.col], A[hi.row * 64 + 16 * s + hi.col]).bits;
    }
  sm90::mbarrier_wait_parity(bar, 0);
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  warpgroup::fence_operand(d);
  warpgroup::fence();
  for (int s = 0; s < 4; ++s)
    warpgroup::mma_async_rs<bf16, 64>(d, a[s], operand_desc(sB, 0, s, 0), s > 0);
  warpgroup::commit_group();
  warpgroup::wait_group<0>();
  warpgroup::fence_operand(d);
  store_acc(out, d, 64, 32);
}

// The attention pattern: S = Q K^T (SS, both K-major, 64 x 64 x 64), P = bf16(S) kept in
// registers, O = P V (RS, V MN-major [k][n], 64 x 64). Writes S and O.
extern "C" __global__ void __launch_bounds__(128)
    wgmma_chain_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                     const __grid_constant__ TensorMap tmV, float* outS, float* outO) {
  const uint32_t sQ = aligned_smem_base(), sK = sQ + 8192, sV = sK + 8192, bar = sV + 8192;
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(bar, 1);
    sm90::fence_mbarrier_init();
  }
  block::sync();
  if (threadIdx.x == 0) {
    sm90::mbarrier_arrive_expect_tx(bar, 3 * 8192);
    sm90::tma_load_2d(sQ, &tmQ, bar, 0, 0);
    sm90::tma_load_2d(sK, &tmK, bar, 0, 0);
    sm90::tma_load_2d(sV, &tmV, bar, 0, 0);
  }
  sm90::mbarrier_wait_parity(bar, 0);
  float s_acc[32], o_acc[32];
  for (int i = 0; i < 32; ++i) s_acc[i] = o_acc[i] = 0.f;
  warpgroup::fence_operand(s_acc);
  warpgroup::fence();
  for (int s = 0; s < 4; ++s)
    warpgroup::mma_async_ss<bf16, 64>(s_acc, operand_desc(sQ, 0, s, 0), operand_desc(sK, 0, s, 0),
                                      s > 0);
  warpgroup::commit_group();
  warpgroup::wait_group<0>();
  warpgroup::fence_operand(s_acc);
  uint32_t p[4][4];
  for (int kk = 0; kk < 4; ++kk) warpgroup::acc_to_a_bf16(p[kk], s_acc, kk);
  warpgroup::fence_operand(o_acc);
  warpgroup::fence();
  for (int kk = 0; kk < 4; ++kk)
    warpgroup::mma_async_rs<bf16, 64, 1>(o_acc, p[kk], operand_desc(sV, 1, kk, 8192), kk > 0);
  warpgroup::commit_group();
  warpgroup::wait_group<0>();
  warpgroup::fence_operand(o_acc);
  store_acc(outS, s_acc, 64, 32);
  store_acc(outO, o_acc, 64, 32);
}

// stmatrix + TMA store: the warpgroup holds a 64 x 64 tile in accumulator layout with value
// v(r, c) = (r * 64 + c) % 251 - 125 (exact in bf16), rounds it to bf16, stores it to shared
// memory with stmatrix (row-major, 128B-swizzled) and stmatrix.trans (transposed, unswizzled),
// then TMA-stores both: tmOut with SWIZZLE_128B, tmOutT without swizzle. Box {64, 64} each.
extern "C" __global__ void __launch_bounds__(128)
    stmatrix_tma_store(const __grid_constant__ TensorMap tmOut,
                       const __grid_constant__ TensorMap tmOutT) {
  const uint32_t sO = aligned_smem_base(), sT = sO + 8192;
  float d[32];
  for (int r = 0; r < 32; ++r) {
    const Coord c = sm90::wgmma_acc(threadIdx.x, r);
    d[r] = static_cast<float>((c.row * 64 + c.col) % 251 - 125);
  }
  const int warp_id = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int j = 0; j < 4; ++j) { // 16-column block j: registers 8j..8j+7
    uint32_t regs[4];
    warpgroup::acc_to_a_bf16(regs, d, j);
    // Lane l addresses row l%8 of matrix l/8: matrices (rows +0/+8) x (cols +0/+8).
    const int row = 16 * warp_id + lane % 8 + 8 * ((lane / 8) % 2), col = 16 * j + 8 * (lane / 16);
    warp::stmatrix_x4(sO + swizzle_128b(static_cast<uint32_t>(row * 128 + col * 2)), regs);
    // Transposed: stored row = original column, holding original rows.
    const int trow = 16 * j + lane % 8 + 8 * (lane / 16), tcol = 16 * warp_id + 8 * ((lane / 8) % 2);
    warp::stmatrix_x4_trans(sT + static_cast<uint32_t>(trow * 128 + tcol * 2), regs);
  }
  sm90::fence_proxy_async_shared();
  block::sync();
  if (threadIdx.x == 0) {
    sm90::tma_store_2d(&tmOut, 0, 0, sO);
    sm90::tma_store_2d(&tmOutT, 0, 0, sT);
    sm90::tma_store_commit();
    sm90::tma_store_wait<0>();
  }
}
)CUDA";

/// GpuDeviceLib kernels valid on sm_80 and sm_90a: mma.sync m16n8k16 fed by ldmatrix, cp.async
/// with zero-fill predication.
inline const char* const kWarpMmaTests = R"CUDA(
#include "tilepilot_device.cuh"
using namespace tp;

// One warp. A (16 x 16, [m][k]), Bt (16 x 16 = B^T, [n][k]), B (16 x 16, [k][n]), all T.
// out0 = A * B via ldmatrix.x4 of Bt; out1 via ldmatrix.x4.trans of B; out2 via ldmatrix.x2 of
// Bt per n-tile. Each out is 16 x 16 f32 row-major.
template <typename T>
__device__ void mma_ldmatrix(const T* A, const T* Bt, const T* B, float* out) {
  __shared__ alignas(128) T sA[256], sBt[256], sB[256];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) {
    sA[i] = A[i];
    sBt[i] = Bt[i];
    sB[i] = B[i];
  }
  warp::sync();
  uint32_t a[4], b[4], bt[4], b0[2], b1[2];
  const Coord ca = sm80::ldmatrix_x4_a_src(lane), cb = sm80::ldmatrix_x4_b_src(lane),
              ct = sm80::ldmatrix_x4_trans_b_src(lane);
  warp::ldmatrix_x4(a, smem_u32(&sA[ca.row * 16 + ca.col]));
  warp::ldmatrix_x4(b, smem_u32(&sBt[cb.row * 16 + cb.col]));
  warp::ldmatrix_x4_trans(bt, smem_u32(&sB[ct.row * 16 + ct.col]));
  // x2: lanes 0..15 address rows n = l % 8 (+ 8 for tile 1), k = 8 * (l / 8).
  const int l16 = lane % 16;
  warp::ldmatrix_x2(b0, smem_u32(&sBt[(l16 % 8) * 16 + 8 * (l16 / 8)]));
  warp::ldmatrix_x2(b1, smem_u32(&sBt[(8 + l16 % 8) * 16 + 8 * (l16 / 8)]));
  const uint32_t bsets[3][2][2] = {{{b[0], b[1]}, {b[2], b[3]}},
                                   {{bt[0], bt[1]}, {bt[2], bt[3]}},
                                   {{b0[0], b0[1]}, {b1[0], b1[1]}}};
  for (int v = 0; v < 3; ++v)
    for (int nt = 0; nt < 2; ++nt) {
      const float zero[4] = {0.f, 0.f, 0.f, 0.f};
      float d[4];
      const uint32_t bb[2] = {bsets[v][nt][0], bsets[v][nt][1]};
      if constexpr (is_same<T, bf16>::value)
        warp::mma_m16n8k16_bf16(d, a, bb, zero);
      else
        warp::mma_m16n8k16_f16(d, a, bb, zero);
      for (int i = 0; i < 4; ++i) {
        const Coord c = sm80::mma16816_c(lane, i);
        out[v * 256 + c.row * 16 + 8 * nt + c.col] = d[i];
      }
    }
}
extern "C" __global__ void mma_ldmatrix_bf16(const bf16* A, const bf16* Bt, const bf16* B,
                                             float* out) {
  mma_ldmatrix<bf16>(A, Bt, B, out);
}
extern "C" __global__ void mma_ldmatrix_f16(const half* A, const half* Bt, const half* B,
                                            float* out) {
  mma_ldmatrix<half>(A, Bt, B, out);
}

// cp.async of a 32 x 64 bf16 tile starting at row `row0` of a rows x 64 matrix: rows past the
// end are zero-filled (src_bytes 0); the chunk holding columns 56..63 of the last valid row copies
// only 6 bytes (columns 56..58, the rest zero). Also copies row 0 with cp.async.ca 4- and
// 8-byte copies into dst2 (64 + 64 elements). 128 threads; shared memory is poisoned first.
extern "C" __global__ void cp_async_tile(const bf16* src, int rows, int row0, bf16* dst,
                                         bf16* dst2) {
  __shared__ alignas(128) bf16 s[32 * 64];
  __shared__ alignas(16) bf16 s2[128];
  for (int i = threadIdx.x; i < 32 * 64; i += blockDim.x) s[i] = bf16{0xffff};
  if (threadIdx.x < 128) s2[threadIdx.x] = bf16{0xffff};
  block::sync();
  for (int c = threadIdx.x; c < 32 * 8; c += blockDim.x) {
    const int r = c / 8, col = 8 * (c % 8), gr = row0 + r;
    int bytes = gr < rows ? 16 : 0;
    if (gr == rows - 1 && col == 56) bytes = 6;
    const bf16* p = gr < rows ? src + gr * 64 + col : src;
    sm80::cp_async_16(smem_u32(&s[r * 64 + col]), p, bytes);
  }
  sm80::cp_async_commit();
  if (threadIdx.x < 32) sm80::cp_async_ca<4>(smem_u32(&s2[2 * threadIdx.x]), src + 2 * threadIdx.x);
  if (threadIdx.x < 16)
    sm80::cp_async_ca<8>(smem_u32(&s2[64 + 4 * threadIdx.x]), src + 4 * threadIdx.x);
  sm80::cp_async_commit();
  sm80::cp_async_wait<1>();
  sm80::cp_async_wait<0>();
  block::sync();
  for (int i = threadIdx.x; i < 32 * 64; i += blockDim.x) dst[i] = s[i];
  if (threadIdx.x < 128) dst2[threadIdx.x] = s2[threadIdx.x];
}

// cg::ld_vec at every element offset of a 16-byte block, with and without `slack` (the
// realigned two-block load, else the narrower loads): thread t < 32 loads 8 bf16 (case t % 16
// as offset (t % 8), slack t / 8 % 2) and 16 bf16 (t >= 16) from src + 16 + offset; thread
// 32 + t < 40 loads 4 f32 from srcf + 8 + t % 4, slack t / 4. Outputs are row per case, widened
// to f32: dst [32][16], dstf [8][4].
extern "C" __global__ void ld_vec_offsets(const bf16* src, float* dst, const float* srcf,
                                          float* dstf) {
  const int t = threadIdx.x;
  if (t < 32) {
    const int off = t % 8;
    const bool slack = (t / 8) % 2;
    float r[16];
    if (t < 16) {
      cg::ld_vec<8>(r, src + 16 + off, slack);
      for (int i = 8; i < 16; ++i) r[i] = 0.f;
    } else {
      cg::ld_vec<16>(r, src + 16 + off, slack);
    }
    for (int i = 0; i < 16; ++i) dst[t * 16 + i] = r[i];
  } else if (t < 40) {
    const int c = t - 32;
    float r[4];
    cg::ld_vec<4>(r, srcf + 8 + c % 4, c / 4 == 1);
    for (int i = 0; i < 4; ++i) dstf[c * 4 + i] = r[i];
  }
}
)CUDA";

/// A warp-specialized, TMA-pipelined GEMM (sm_90a): C (M x N, f32 row-major) = A (M x K, [m][k])
/// * B^T with B given as N x K ([n][k]), bf16 inputs. CTA tile 128 x 128 x 64, 4 stages; warpgroup
/// 0 produces (one thread issues TMA), warpgroups 1 and 2 each multiply 64 rows with
/// wgmma m64n128k16. M, N multiples of 128 and K of 64. Also the cold-compile benchmark.
inline const char* const kGemmPipelined = R"CUDA(
#include "tilepilot_device.cuh"
using namespace tp;

constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 4;
constexpr uint32_t kABytes = kBM * kBK * 2, kStageBytes = (kBM + kBN) * kBK * 2;

extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_tn_bf16(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                 float* C, int M, int N, int K) {
  extern __shared__ unsigned char dyn_smem[];
  const uint32_t base = (smem_u32(dyn_smem) + 1023u) & ~1023u;
  const uint32_t full = base + kStages * kStageBytes, empty = full + 8 * kStages;
  const int wg = threadIdx.x / 128, nk = K / kBK, m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  if (threadIdx.x == 0) {
    sm90::prefetch_tensormap(&tmA);
    sm90::prefetch_tensormap(&tmB);
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(full + 8 * s, 1);
      sm90::mbarrier_init(empty + 8 * s, 256); // every consumer thread releases the stage
    }
    sm90::fence_mbarrier_init();
  }
  block::sync();
  if (wg == 0) {
    warpgroup::setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      for (int kb = 0; kb < nk; ++kb) {
        const int s = kb % kStages, use = kb / kStages;
        if (use > 0) sm90::mbarrier_wait_parity(empty + 8 * s, (use - 1) & 1);
        const uint32_t sA = base + s * kStageBytes;
        sm90::mbarrier_arrive_expect_tx(full + 8 * s, kStageBytes);
        sm90::tma_load_2d(sA, &tmA, full + 8 * s, kb * kBK, m0);
        sm90::tma_load_2d(sA + kABytes, &tmB, full + 8 * s, kb * kBK, n0);
      }
    }
  } else {
    warpgroup::setmaxnreg_inc<232>();
    float d[64];
    for (int i = 0; i < 64; ++i) d[i] = 0.f;
    for (int kb = 0; kb < nk; ++kb) {
      const int s = kb % kStages;
      sm90::mbarrier_wait_parity(full + 8 * s, (kb / kStages) & 1);
      const uint32_t sA = base + s * kStageBytes + (wg - 1) * 64 * 128;
      const uint32_t sB = base + s * kStageBytes + kABytes;
      warpgroup::fence_operand(d);
      warpgroup::fence();
      for (int k = 0; k < kBK / 16; ++k)
        warpgroup::mma_async_ss<bf16, 128>(d, sm90::kmajor_sw128_desc(sA + 32 * k),
                                           sm90::kmajor_sw128_desc(sB + 32 * k));
      warpgroup::commit_group();
      warpgroup::wait_group<0>();
      warpgroup::fence_operand(d);
      sm90::mbarrier_arrive(empty + 8 * s);
    }
    for (int r = 0; r < 64; ++r) {
      const Coord c = sm90::wgmma_acc(threadIdx.x % 128, r);
      C[(m0 + 64 * (wg - 1) + c.row) * N + n0 + c.col] = d[r];
    }
  }
}
)CUDA";

} // namespace tp::device_test
