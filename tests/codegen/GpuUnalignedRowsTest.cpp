// Rows that are not 16-byte aligned, on the GPU, against the interpreter, bit for bit: the
// vector paths of fragment copies (tp::cg::ld_issue / ld_take / st_vec, each run alone, and
// with the row_lanes annotation their _lanes forms, whose lanes move a row's runs together as
// aligned blocks) and of global -> shared chunks (aligned blocks shifted into place; by lanes
// with row_lanes). Every case runs at row_lanes 0 (the default) and 3, and the fragment cases
// also at 1 and 2. Rows of every alignment class (0, 2, 4
// and 8 bytes off), tiles one, two and four rows wide per warp, edge tiles with runs past the
// tensor, ragged tiles whose last lanes hold no run (they sit out the lanes' calls), a 1-d
// fragment held by every warp and stored by one, f32 runs, and a transpose at odd shapes.
// Values are distinct over 251 elements, so a run stored one or more places off shows up.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "DifferentialCases.h"
#include "codegen/cpu/Interpreter.h"
#include "compile/CudaKernel.h"
#include "ops/CudaCheck.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::difftest;

namespace {

/// C = A * 2 + 1 through register fragments of bm x bn tiles at 128 threads.
Kernel affine(DType dt, int64_t bm, int64_t bn, int lanes) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, dt), C("C", {M, N}, dt);
  return kernel("realigned_affine", {A, C}, grid(ceildiv(N, bn), ceildiv(M, bm)), threads(128),
                [&](Var bx, Var by) {
                  annotate("row_lanes", std::to_string(lanes));
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

/// Runs k on (input, output) on the interpreter and on the GPU; the outputs' first difference,
/// "" when they agree bit for bit.
std::string gpu_against_interpreter(const Kernel& k, cuda::CudaKernel& ck, HostTensor in,
                                    HostTensor out) {
  std::vector<HostTensor> args = {std::move(in), std::move(out)};
  std::vector<HostTensor> want = args;
  std::vector<HostTensor*> pw = {&want[0], &want[1]};
  cpu::interpret(k, pw);
  ops::DeviceArgs d = ops::DeviceArgs::upload(args);
  ck.launch(d.tensors);
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  d.download(args, {1});
  return first_mismatch(args[1], want[1], 0);
}

void expect_match(DType dt, int64_t bm, int64_t bn, const std::vector<int64_t>& widths) {
  for (int lanes : {0, 3, 1, 2}) {
    Kernel k = affine(dt, bm, bn, lanes);
    cuda::CudaKernel ck(k, "sm_90a");
    for (int64_t N : widths) {
      const int64_t M = 37;
      EXPECT_EQ(gpu_against_interpreter(k, ck, distinct(dt, {M, N}), sentinel(dt, {M, N})), "")
          << dtype_name(dt) << " " << bm << "x" << bn << " tiles, N " << N << ", row_lanes "
          << lanes;
    }
  }
}

TEST(GpuUnalignedRows, Bf16FragmentStores) {
  rt::ensure_context();
  // 256 columns: one row per warp; 128: two; 64: four. N mod 8 = 0, 1, 2, 4, 7, and widths
  // narrower than a tile.
  for (int64_t bn : {256, 128, 64})
    expect_match(bf16, 16, bn, {512, 8193, 1026, 1028, 1031, 61, 9});
}

// 200 columns over 32 thread columns of 8: lanes 25 to 31 hold no run of the tile, so they do
// not call, and lane 24 stores its run's tail itself.
TEST(GpuUnalignedRows, RaggedTilesLeaveLanesOut) {
  rt::ensure_context();
  expect_match(bf16, 16, 200, {8193, 1031, 200, 61});
}

/// c = a * 2 + 1 over a 1-d tensor in bn-element fragments starting `shift` elements past each
/// block's multiple of bn (1: every run is 2 bytes off its block): every warp holds the fragment
/// (a cols layout replicated over the thread rows), the first thread row stores it.
Kernel affine_1d(int64_t bn, int64_t shift, int lanes) {
  Dim N("N");
  Tensor A("A", {N}, bf16), C("C", {N}, bf16);
  return kernel("realigned_affine_1d", {A, C}, grid(ceildiv(N, bn)), threads(128), [&](Var bx) {
    annotate("row_lanes", std::to_string(lanes));
    Tile a = alloc_fragment({bn}, bf16), c = alloc_fragment({bn}, bf16);
    copy(A.tile(bx * bn + shift), a);
    parallel({bn}, [&](Var j) { c(j) = a(j) * 2.0 + 1.0; });
    copy(c, C.tile(bx * bn + shift));
  });
}

TEST(GpuUnalignedRows, OneDimensionalFragments) {
  rt::ensure_context();
  for (int lanes : {0, 3})
    for (int64_t bn : {256, 1024})
      for (int64_t shift : {0, 1, 4}) {
        Kernel k = affine_1d(bn, shift, lanes);
        cuda::CudaKernel ck(k, "sm_90a");
        for (int64_t N : {4096, 4097, 1031, 9})
          EXPECT_EQ(gpu_against_interpreter(k, ck, distinct(bf16, {N}), sentinel(bf16, {N})), "")
              << bn << "-element fragments shifted " << shift << ", N " << N << ", row_lanes "
              << lanes;
      }
}

TEST(GpuUnalignedRows, F32FragmentStores) {
  rt::ensure_context();
  for (int64_t bn : {128, 32})
    expect_match(f32, 8, bn, {256, 1025, 1026, 1027, 5});
}

/// B = A transposed through a b x b shared tile (lesson 03's kernel).
Kernel transpose(int64_t b, int lanes) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {N, M}, bf16);
  return kernel("realigned_transpose", {A, B}, grid(ceildiv(N, b), ceildiv(M, b)), threads(128),
                [&](Var bx, Var by) {
                  annotate("row_lanes", std::to_string(lanes));
                  Tile s = alloc_shared({b, b}, bf16), t = alloc_fragment({b, b}, bf16);
                  copy(A.tile(by * b, bx * b), s);
                  parallel({b, b}, [&](Var i, Var j) { t(i, j) = s(j, i); });
                  copy(t, B.tile(bx * b, by * b));
                });
}

TEST(GpuUnalignedRows, SharedChunksThroughATranspose) {
  rt::ensure_context();
  for (int lanes : {0, 3})
    for (int64_t b : {32, 64}) {
      Kernel k = transpose(b, lanes);
      cuda::CudaKernel ck(k, "sm_90a");
      for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{
               {256, 512}, {77, 133}, {1031, 1027}, {130, 1026}, {9, 5}}) {
        EXPECT_EQ(gpu_against_interpreter(k, ck, distinct(bf16, {M, N}), sentinel(bf16, {N, M})),
                  "")
            << b << " tiles, " << M << " x " << N << ", row_lanes " << lanes;
      }
    }
}

} // namespace
