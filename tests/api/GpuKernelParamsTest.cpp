// GPU side of KernelParamsTest (ctest label gpu; needs an sm_90a device): scalar parameters,
// lets and strided tensors give on CUDA what the interpreter gives, including a slice of a
// larger device buffer (TMA-able and not) and a transposed operand passed through strides.
#include <gtest/gtest.h>

#include <cmath>

#include "KernelsForParams.h"

using namespace tp;

namespace {

/// Every element of `got` within atol + rtol * |want| of `want`.
void expect_close(const HostTensor& got, const HostTensor& want, double atol, double rtol) {
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_LE(std::abs(got.get(i) - want.get(i)), atol + rtol * std::abs(want.get(i)))
        << "element " << i << ": " << got.get(i) << " vs " << want.get(i);
}

uint64_t at(const DeviceArray& a, int64_t elem, DType t) {
  return a.tensor().ptr + static_cast<uint64_t>(elem * dtype_bytes(t));
}

TEST(GpuKernelParams, ScalarsMatchInterpreter) {
  Kernel k = test::scale_shift(false);
  HostTensor x(f32, {37, 70}), want(f32, {37, 70});
  x.fill_random(3);
  interpret(k, {x, 0.75f, want, -4});
  DeviceArray dx = DeviceArray::from(x), dy(f32, {37, 70});
  dy.fill_bytes(0xff);
  CompiledKernel ck = compile(k);
  ck.launch({dx, 0.75f, dy, -4});
  synchronize();
  expect_close(dy.to_host(), want, 1e-6, 1e-6);
}

TEST(GpuKernelParams, StridedSliceOfLargerBufferMatchesInterpreter) {
  // X = rows 5..41, columns 4..73 of a [50, 80] buffer (first element 16-byte aligned); Y the
  // same box of a [40, 100] buffer whose other elements must stay as they were.
  HostTensor big(f32, {50, 80}), out(f32, {40, 100});
  big.fill_random(9);
  out.fill(-7);
  HostTensor want = out;
  Kernel k = test::scale_shift(true, true);
  interpret(k, {HostView{&big, 5 * 80 + 4, {37, 70}, {80, 1}}, 1.5f,
                HostView{&want, 2 * 100 + 12, {37, 70}, {100, 1}}, 2});
  DeviceArray dbig = DeviceArray::from(big), dout = DeviceArray::from(out);
  CompiledKernel ck = compile(k);
  ck.launch({DeviceTensor(at(dbig, 5 * 80 + 4, f32), f32, {37, 70}, {80, 1}), 1.5f,
             DeviceTensor(at(dout, 2 * 100 + 12, f32), f32, {37, 70}, {100, 1}), 2});
  synchronize();
  expect_close(dout.to_host(), want, 1e-6, 1e-6);
}

TEST(GpuKernelParams, LetGemmMatchesInterpreter) {
  Kernel k = test::let_gemm();
  HostTensor a(bf16, {200, 136}), b(bf16, {136, 192}), want(f32, {200, 192});
  a.fill_random(1);
  b.fill_random(2);
  interpret(k, {a, b, want});
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b), dc(f32, {200, 192});
  dc.fill_bytes(0xff);
  CompiledKernel ck = compile(k);
  ck.launch({da, db, dc});
  synchronize();
  expect_close(dc.to_host(), want, 1e-3, 1e-3);
}

/// A and B as views: A strided (a slice, or the transpose of a [K, M] buffer), B the columns
/// 8..8+N of a wider buffer (TMA-able: 16-byte aligned start and pitch), C a slice too.
void strided_gemm(bool transpose_a) {
  const int64_t M = 130, N = 96, K = 72, W = N + 24;
  Kernel k = test::let_gemm(true, true, true);
  HostTensor a(bf16, transpose_a ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M + 3, K + 8});
  HostTensor bw(bf16, {K, W}), cw(f32, {M, W});
  a.fill_random(4);
  bw.fill_random(5);
  cw.fill(-3);
  HostView av = transpose_a ? HostView{&a, 0, {M, K}, {1, M}}
                            : HostView{&a, 2 * (K + 8) + 8, {M, K}, {K + 8, 1}};
  HostTensor want = cw;
  interpret(k, {av, HostView{&bw, 8, {K, N}, {W, 1}}, HostView{&want, 4, {M, N}, {W, 1}}});
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(bw), dc = DeviceArray::from(cw);
  CompiledKernel ck = compile(k);
  ck.launch({DeviceTensor(at(da, av.offset, bf16), bf16, av.shape, av.strides),
             DeviceTensor(at(db, 8, bf16), bf16, {K, N}, {W, 1}),
             DeviceTensor(at(dc, 4, f32), f32, {M, N}, {W, 1})});
  synchronize();
  expect_close(dc.to_host(), want, 1e-3, 1e-3);
}

TEST(GpuKernelParams, StridedSlicesGemmMatchesInterpreter) {
  strided_gemm(false);
}
TEST(GpuKernelParams, TransposedOperandViaStridesMatchesInterpreter) {
  strided_gemm(true);
}

TEST(GpuKernelParams, TableGemmMatchesInterpreter) {
  HostTensor a(bf16, {256, 96}), b(bf16, {96, 128}), rows(i32, {4});
  a.fill_random(6);
  b.fill_random(7);
  for (int g = 0; g < 4; ++g)
    rows.set(g, (3 - g) * 64);
  for (bool from_tile : {false, true}) {
    Kernel k = test::table_gemm(from_tile);
    HostTensor want(f32, {256, 128});
    want.poison();
    interpret(k, {a, b, want, rows});
    DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b), dr = DeviceArray::from(rows);
    DeviceArray dc(f32, {256, 128});
    dc.fill_bytes(0xff);
    CompiledKernel ck = compile(k);
    ck.launch({da, db, dc, dr});
    synchronize();
    expect_close(dc.to_host(), want, 1e-3, 1e-3);
  }
}

} // namespace
