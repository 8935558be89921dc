// Stores of 16-byte fragment runs go through tp::cg::st_vec_lanes: where a tensor's rows are not
// 16-byte aligned, each lane stores the aligned block before its run completed from its
// neighbour's run, and the lanes at the ends of a contiguous segment store their parts narrowly.
// Rows of every width class (aligned, 2, 4 and 8 bytes off), tiles one, two and four rows wide
// per warp, edge tiles whose lanes are partly past the tensor, and f32 runs: the GPU must write
// exactly what the interpreter writes. Values are distinct over 251 elements, so a run stored one
// or more lanes off shows up.
#include <gtest/gtest.h>

#include "DifferentialCases.h"
#include "codegen/cpu/Interpreter.h"
#include "compile/CudaKernel.h"
#include "ops/CudaCheck.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::difftest;

namespace {

/// C = A * 2 + 1 through register fragments of bm x bn tiles at 128 threads.
Kernel affine(DType dt, int64_t bm, int64_t bn) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, dt), C("C", {M, N}, dt);
  return kernel("realigned_affine", {A, C}, grid(ceildiv(N, bn), ceildiv(M, bm)), threads(128),
                [&](Var bx, Var by) {
                  Tile a = alloc_fragment({bm, bn}, dt), c = alloc_fragment({bm, bn}, dt);
                  copy(A.tile(by * bm, bx * bn), a);
                  parallel({bm, bn}, [&](Var i, Var j) { c(i, j) = a(i, j) * 2.0 + 1.0; });
                  copy(c, C.tile(by * bm, bx * bn));
                });
}

HostTensor distinct(DType d, std::vector<int64_t> shape) {
  HostTensor t(d, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, static_cast<double>(i % 251 - 125));
  return t;
}

void expect_match(DType dt, int64_t bm, int64_t bn, const std::vector<int64_t>& widths) {
  Kernel k = affine(dt, bm, bn);
  cuda::CudaKernel ck(k, "sm_90a");
  for (int64_t N : widths) {
    const int64_t M = 37;
    std::vector<HostTensor> args = {distinct(dt, {M, N}), sentinel(dt, {M, N})};
    std::vector<HostTensor> want = args;
    std::vector<HostTensor*> pw = {&want[0], &want[1]};
    cpu::interpret(k, pw);
    ops::DeviceArgs d = ops::DeviceArgs::upload(args);
    ck.launch(d.tensors);
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    d.download(args, {1});
    EXPECT_EQ(first_mismatch(args[1], want[1], 0), "")
        << dtype_name(dt) << " " << bm << "x" << bn << " tiles, N " << N;
  }
}

TEST(GpuRealignedStores, Bf16RowsOfEveryAlignment) {
  rt::ensure_context();
  // 256 columns: one row per warp; 128: two; 64: four. N mod 8 = 0, 1, 2, 4, 7, and widths
  // narrower than a tile.
  for (int64_t bn : {256, 128, 64})
    expect_match(bf16, 16, bn, {512, 8193, 1026, 1028, 1031, 61, 9});
}

TEST(GpuRealignedStores, F32RowsOffByFourAndEightBytes) {
  rt::ensure_context();
  for (int64_t bn : {128, 32})
    expect_match(f32, 8, bn, {256, 1025, 1026, 1027, 5});
}

} // namespace
