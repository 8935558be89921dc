// GPU checks of the device library (ctest label `gpu`; run on the sm_90a machine): small
// self-checking kernels from DeviceTestKernels.h against host references computed in double
// from the same bf16/f16-rounded inputs. Outputs are poisoned with NaN before each launch.
//   wgmma SS: 128B-swizzled operands loaded by TMA, K-major and MN-major (LBO/SBO/stepping as
//   documented in device/arch/sm90/smem_desc.cuh), N = 64, 128, 256, bf16 and f16;
//   wgmma RS; an SS -> RS chain (attention's P = S reuse); stmatrix + TMA store;
//   mma.sync m16n8k16 fed by ldmatrix (x4, x4.trans, x2); cp.async zero-fill; a pipelined GEMM.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "DeviceTestKernels.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/Driver.h"
#include "runtime/Environment.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "types.cuh"

using namespace tp::rt;

namespace {

std::string arch() {
  std::string why;
  auto info = device_info(selected_device_ordinal(), &why);
  if (!info) throw std::runtime_error("no GPU: " + why);
  if (info->arch != "sm_90a")
    throw std::runtime_error("GpuDeviceLib needs an sm_90a device, found " + info->arch);
  return info->arch;
}

CUfunction kernel(const char* source, const char* entry) {
  // One canonical IR per source: the second entry of a source loads the cached cubin.
  return jit_load(source, entry, "device-test", arch(), {}).fn;
}

/// Random 16-bit floats in [-1, 1): the bit patterns, and their exact values.
struct Half16 {
  std::vector<uint16_t> bits;
  std::vector<double> value;
};
Half16 random_16(size_t n, bool f16, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Half16 h;
  for (size_t i = 0; i < n; ++i) {
    const float x = u(rng);
    const uint16_t b = f16 ? tp::to_half(x).bits : tp::to_bf16(x).bits;
    h.bits.push_back(b);
    h.value.push_back(f16 ? tp::to_float(tp::half{b}) : tp::to_float(tp::bf16{b}));
  }
  return h;
}

/// A 2-D tensor map over a row-major (outer x inner) 16-bit array.
CUtensorMap map_2d(CUdeviceptr base, bool f16, uint64_t inner, uint64_t outer, uint32_t box_inner,
                   uint32_t box_outer, CUtensorMapSwizzle swizzle) {
  auto encode = driver().cuTensorMapEncodeTiled;
  if (!encode) throw std::runtime_error("the driver has no cuTensorMapEncodeTiled");
  CUtensorMap map;
  const cuuint64_t dims[2] = {inner, outer}, strides[1] = {inner * 2};
  const cuuint32_t box[2] = {box_inner, box_outer}, elem_strides[2] = {1, 1};
  TILEPILOT_CU(encode(&map,
                      f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                      reinterpret_cast<void*>(base), dims, strides, box, elem_strides,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

DeviceBuffer upload(const std::vector<uint16_t>& bits) {
  return DeviceBuffer::from(bits);
}

DeviceBuffer poisoned_f32(size_t n) {
  DeviceBuffer b(n * sizeof(float));
  b.memset(0xff); // NaN
  return b;
}

void run(CUfunction fn, unsigned threads, unsigned smem, void** args, unsigned gx = 1,
         unsigned gy = 1) {
  LaunchConfig c;
  c.grid = {gx, gy, 1};
  c.block = {threads, 1, 1};
  c.shared_bytes = smem;
  launch(fn, c, args);
  TILEPILOT_CU(driver().cuCtxSynchronize());
}

/// Every got[i] within 1e-3 (+1e-3 relative) of want[i]; NaN never passes.
void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = 1e-3 + 1e-3 * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol) && ++bad <= 5)
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements wrong";
}

/// C[m][n] = sum_k A(m, k) * B(k, n) with accessor functions.
template <typename FA, typename FB>
std::vector<double> matmul(int M, int N, int K, FA a, FB b) {
  std::vector<double> c(size_t(M) * N, 0.0);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k)
        s += a(m, k) * b(k, n);
      c[size_t(m) * N + n] = s;
    }
  return c;
}

/// One SS wgmma test: D (64 x N) = A (64 x 64) * B (64 x N), operands stored per trans_a/b.
void check_wgmma_ss(const char* entry, int N, bool trans_a, bool trans_b, bool f16) {
  const Half16 a = random_16(64 * 64, f16, 1), b = random_16(size_t(64) * N, f16, 2);
  // Logical A(m, k), B(k, n) -> storage index.
  auto ia = [&](int m, int k) { return trans_a ? k * 64 + m : m * 64 + k; };
  auto ib = [&](int k, int n) { return trans_b ? k * N + n : n * 64 + k; };
  DeviceBuffer da = upload(a.bits), db = upload(b.bits), out = poisoned_f32(size_t(64) * N);
  const auto sw = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMap ma = map_2d(da.ptr(), f16, 64, 64, 64, 64, sw);
  CUtensorMap mb =
      trans_b ? map_2d(db.ptr(), f16, N, 64, 64, 64, sw) : map_2d(db.ptr(), f16, 64, N, 64, N, sw);
  CUdeviceptr po = out.ptr();
  void* args[] = {&ma, &mb, &po};
  run(kernel(tp::device_test::kWgmmaTests, entry), 128, 1024 + 8192 + N * 128 + 64, args);
  expect_close(out.to_vector<float>(),
               matmul(
                   64, N, 64, [&](int m, int k) { return a.value[ia(m, k)]; },
                   [&](int k, int n) { return b.value[ib(k, n)]; }),
               entry);
}

} // namespace

TEST(GpuDeviceLib, WgmmaSsKMajorBf16N64) {
  check_wgmma_ss("wgmma_ss_bf16_kk_n64", 64, false, false, false);
}
TEST(GpuDeviceLib, WgmmaSsKMajorF16N64) {
  check_wgmma_ss("wgmma_ss_f16_kk_n64", 64, false, false, true);
}
TEST(GpuDeviceLib, WgmmaSsMnMajorBN128) {
  check_wgmma_ss("wgmma_ss_bf16_kn_n128", 128, false, true, false);
}
TEST(GpuDeviceLib, WgmmaSsMnMajorAAndB) {
  check_wgmma_ss("wgmma_ss_bf16_nn_n64", 64, true, true, false);
}
TEST(GpuDeviceLib, WgmmaSsKMajorBf16N256) {
  check_wgmma_ss("wgmma_ss_bf16_kk_n256", 256, false, false, false);
}

TEST(GpuDeviceLib, WgmmaRsAFromRegisters) {
  const Half16 a = random_16(64 * 64, false, 3), b = random_16(64 * 64, false, 4);
  DeviceBuffer da = upload(a.bits), db = upload(b.bits), out = poisoned_f32(64 * 64);
  CUtensorMap mb = map_2d(db.ptr(), false, 64, 64, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B);
  CUdeviceptr pa = da.ptr(), po = out.ptr();
  void* args[] = {&pa, &mb, &po};
  run(kernel(tp::device_test::kWgmmaTests, "wgmma_rs_bf16_n64"), 128, 1024 + 8192 + 64, args);
  expect_close(out.to_vector<float>(),
               matmul(
                   64, 64, 64, [&](int m, int k) { return a.value[m * 64 + k]; },
                   [&](int k, int n) { return b.value[n * 64 + k]; }),
               "wgmma RS");
}

TEST(GpuDeviceLib, WgmmaChainAccumulatorFeedsRsOperand) {
  const Half16 q = random_16(64 * 64, false, 5), k = random_16(64 * 64, false, 6),
               v = random_16(64 * 64, false, 7);
  DeviceBuffer dq = upload(q.bits), dk = upload(k.bits), dv = upload(v.bits);
  DeviceBuffer s_out = poisoned_f32(64 * 64), o_out = poisoned_f32(64 * 64);
  const auto sw = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMap mq = map_2d(dq.ptr(), false, 64, 64, 64, 64, sw);
  CUtensorMap mk = map_2d(dk.ptr(), false, 64, 64, 64, 64, sw);
  CUtensorMap mv = map_2d(dv.ptr(), false, 64, 64, 64, 64, sw); // V[k][n]: MN-major
  CUdeviceptr ps = s_out.ptr(), po = o_out.ptr();
  void* args[] = {&mq, &mk, &mv, &ps, &po};
  run(kernel(tp::device_test::kWgmmaTests, "wgmma_chain_bf16"), 128, 1024 + 3 * 8192 + 64, args);
  const std::vector<float> s = s_out.to_vector<float>();
  expect_close(s,
               matmul(
                   64, 64, 64, [&](int m, int j) { return q.value[m * 64 + j]; },
                   [&](int j, int n) { return k.value[n * 64 + j]; }),
               "S = Q K^T");
  // P = bf16(S) as the GPU computed it, so this checks the register reuse, not rounding.
  expect_close(o_out.to_vector<float>(),
               matmul(
                   64, 64, 64,
                   [&](int m, int j) { return double(tp::to_float(tp::to_bf16(s[m * 64 + j]))); },
                   [&](int j, int n) { return v.value[j * 64 + n]; }),
               "O = P V");
}

TEST(GpuDeviceLib, StmatrixThenTmaStoreSwizzledAndTransposed) {
  DeviceBuffer out(64 * 64 * 2), out_t(64 * 64 * 2);
  out.memset(0xff);
  out_t.memset(0xff);
  CUtensorMap mo = map_2d(out.ptr(), false, 64, 64, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B);
  CUtensorMap mt = map_2d(out_t.ptr(), false, 64, 64, 64, 64, CU_TENSOR_MAP_SWIZZLE_NONE);
  void* args[] = {&mo, &mt};
  run(kernel(tp::device_test::kWgmmaTests, "stmatrix_tma_store"), 128, 1024 + 2 * 8192, args);
  const std::vector<uint16_t> got = out.to_vector<uint16_t>(), got_t = out_t.to_vector<uint16_t>();
  int bad = 0;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 64; ++c) {
      const uint16_t want = tp::to_bf16(float((r * 64 + c) % 251 - 125)).bits;
      if (got[r * 64 + c] != want && ++bad <= 5)
        ADD_FAILURE() << "out(" << r << ", " << c << ") = " << got[r * 64 + c] << ", want " << want;
      if (got_t[c * 64 + r] != want && ++bad <= 5)
        ADD_FAILURE() << "out_t(" << c << ", " << r << ") = " << got_t[c * 64 + r] << ", want "
                      << want;
    }
  EXPECT_EQ(bad, 0);
}

TEST(GpuDeviceLib, MmaSyncFedByLdmatrix) {
  for (bool f16 : {false, true}) {
    SCOPED_TRACE(f16 ? "f16" : "bf16");
    const Half16 a = random_16(256, f16, 8), b = random_16(256, f16, 9); // b: B[k][n]
    std::vector<uint16_t> bt(256);
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < 16; ++n)
        bt[n * 16 + k] = b.bits[k * 16 + n];
    DeviceBuffer da = upload(a.bits), dbt = upload(bt), db = upload(b.bits);
    DeviceBuffer out = poisoned_f32(3 * 256);
    CUdeviceptr pa = da.ptr(), pbt = dbt.ptr(), pb = db.ptr(), po = out.ptr();
    void* args[] = {&pa, &pbt, &pb, &po};
    run(kernel(tp::device_test::kWarpMmaTests, f16 ? "mma_ldmatrix_f16" : "mma_ldmatrix_bf16"), 32,
        0, args);
    const std::vector<double> want = matmul(
        16, 16, 16, [&](int m, int k) { return a.value[m * 16 + k]; },
        [&](int k, int n) { return b.value[k * 16 + n]; });
    const std::vector<float> got = out.to_vector<float>();
    const char* names[3] = {"ldmatrix.x4 of B^T", "ldmatrix.x4.trans of B", "ldmatrix.x2 of B^T"};
    for (int v = 0; v < 3; ++v)
      expect_close(std::vector<float>(got.begin() + v * 256, got.begin() + (v + 1) * 256), want,
                   names[v]);
  }
}

TEST(GpuDeviceLib, CpAsyncZeroFillsOutOfBounds) {
  const int rows = 40, row0 = 16;
  const Half16 src = random_16(size_t(rows) * 64, false, 10);
  DeviceBuffer dsrc = upload(src.bits), dst(32 * 64 * 2), dst2(128 * 2);
  dst.memset(0xee);
  dst2.memset(0xee);
  CUdeviceptr ps = dsrc.ptr(), pd = dst.ptr(), pd2 = dst2.ptr();
  int r = rows, r0 = row0;
  void* args[] = {&ps, &r, &r0, &pd, &pd2};
  run(kernel(tp::device_test::kWarpMmaTests, "cp_async_tile"), 128, 0, args);
  const std::vector<uint16_t> got = dst.to_vector<uint16_t>(), got2 = dst2.to_vector<uint16_t>();
  int bad = 0;
  for (int i = 0; i < 32 * 64; ++i) {
    const int gr = row0 + i / 64, col = i % 64;
    uint16_t want = gr < rows ? src.bits[gr * 64 + col] : 0;
    if (gr == rows - 1 && col >= 59) want = 0; // only 6 bytes of that chunk were copied
    if (got[i] != want && ++bad <= 5)
      ADD_FAILURE() << "tile(" << i / 64 << ", " << col << ") = " << got[i] << ", want " << want;
  }
  for (int i = 0; i < 128; ++i)
    if (got2[i] != src.bits[i % 64] && ++bad <= 5)
      ADD_FAILURE() << "cp.async.ca element " << i << " = " << got2[i];
  EXPECT_EQ(bad, 0);
}

// A row of odd length leaves runs 2, 4, ... 14 bytes off a 16-byte boundary; with `slack` the
// run comes from the two aligned blocks around it, shifted (cg::ld_issue, then cg::ld_take).
TEST(GpuDeviceLib, LdVecEveryOffsetWithAndWithoutSlack) {
  const Half16 src = random_16(64, false, 11);
  std::vector<float> srcf(32);
  for (int i = 0; i < 32; ++i)
    srcf[i] = 0.25f * float(i) - 3.0f;
  DeviceBuffer dsrc = upload(src.bits), dsrcf(32 * 4), dst(32 * 16 * 4), dstf(8 * 4 * 4);
  dsrcf.upload(srcf.data(), srcf.size() * 4);
  dst.memset(0xff);
  dstf.memset(0xff);
  CUdeviceptr ps = dsrc.ptr(), pd = dst.ptr(), pf = dsrcf.ptr(), pdf = dstf.ptr();
  void* args[] = {&ps, &pd, &pf, &pdf};
  run(kernel(tp::device_test::kWarpMmaTests, "ld_vec_offsets"), 64, 0, args);
  const std::vector<float> got = dst.to_vector<float>(), gotf = dstf.to_vector<float>();
  int bad = 0;
  for (int t = 0; t < 32; ++t)
    for (int i = 0; i < (t < 16 ? 8 : 16); ++i) {
      const double want = src.value[16 + t % 8 + i];
      if (got[t * 16 + i] != want && ++bad <= 5)
        ADD_FAILURE() << (t < 16 ? "8" : "16") << " bf16 at offset " << t % 8 << ", slack "
                      << (t / 8) % 2 << ", element " << i << ": " << got[t * 16 + i] << ", want "
                      << want;
    }
  for (int c = 0; c < 8; ++c)
    for (int i = 0; i < 4; ++i)
      if (gotf[c * 4 + i] != srcf[8 + c % 4 + i] && ++bad <= 5)
        ADD_FAILURE() << "4 f32 at offset " << c % 4 << ", slack " << c / 4 << ", element " << i
                      << ": " << gotf[c * 4 + i];
  EXPECT_EQ(bad, 0);
}

TEST(GpuDeviceLib, PipelinedGemmMatchesReference) {
  const int M = 256, N = 384, K = 512;
  const Half16 a = random_16(size_t(M) * K, false, 11), b = random_16(size_t(N) * K, false, 12);
  DeviceBuffer da = upload(a.bits), db = upload(b.bits), out = poisoned_f32(size_t(M) * N);
  const auto sw = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMap ma = map_2d(da.ptr(), false, K, M, 64, 128, sw);
  CUtensorMap mb = map_2d(db.ptr(), false, K, N, 64, 128, sw);
  CUdeviceptr pc = out.ptr();
  int m = M, n = N, k = K;
  void* args[] = {&ma, &mb, &pc, &m, &n, &k};
  run(kernel(tp::device_test::kGemmPipelined, "gemm_tn_bf16"), 384, 1024 + 4 * 32768 + 64, args,
      N / 128, M / 128);
  expect_close(out.to_vector<float>(),
               matmul(
                   M, N, K, [&](int i, int j) { return a.value[size_t(i) * K + j]; },
                   [&](int j, int c) { return b.value[size_t(c) * K + j]; }),
               "pipelined GEMM");
}
