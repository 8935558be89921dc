// The paired store of a gemm accumulator into a global tile (LowerCopy.cpp): two adjacent
// columns of a row in one 2-element store. In general it tests bounds and alignment per pair and
// falls back to two element stores; in a variant whose target promises the tensor's rows are
// even and its base aligned (passes::Target::even_rows) and where the tile's column is provably
// even, it tests only the first element's bounds, stores without an address test
// (store2_aligned) and has no fallback. Checked on the lowered statements.
#include <gtest/gtest.h>

#include <tilepilot/tilepilot.h>

#include "AccumulatorTile.h"
#include "LoweredBody.h"
#include "compile/Lower.h"
#include "ir/IRVisitor.h"

using namespace tp;

namespace {

struct Lowered {
  int pair_stores = 0;    // tp::cg::store2 calls (they test the address themselves)
  int aligned_pairs = 0;  // tp::cg::store2_aligned calls (no test)
  int element_stores = 0; // element Stores into C (the fallback)
  uint64_t paired_params = 0;
};

Lowered lower(const Kernel& kernel, uint64_t even_rows, uint64_t views = 0) {
  passes::Target t = passes::Target::parse("sm_90a");
  t.even_rows = even_rows;
  t.view_params = views;
  Lowered out;
  const ir::Buffer& c = kernel.node().params.at(2);
  ir::for_each_stmt(tp::testing::lowered_body(kernel, t, &out.paired_params),
                    [&](const ir::Stmt& st) {
                      if (const auto* e = ir::as<ir::Evaluate>(st))
                        if (const auto* call = ir::as<ir::Intrinsic>(e->value))
                          out.pair_stores += call->name == "tp::cg::store2",
                              out.aligned_pairs += call->name == "tp::cg::store2_aligned";
                      if (const auto* store = ir::as<ir::Store>(st))
                        out.element_stores += store->buffer->uid == c->uid;
                    });
  return out;
}

/// C = A B over 64 x 64 tiles (one warpgroup: a wgmma accumulator), C stored at column
/// bx * 64 + `shift` (shift: a scalar parameter when `shifted`, which no compiler can prove even).
Kernel gemm(DType out, bool shifted = false, bool strided_c = false) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16);
  Tensor C = strided_c ? Tensor("C", {M, N}, out, strided) : Tensor("C", {M, N}, out);
  Scalar shift("shift", i32);
  auto body = [&](Var bx, Var by) {
    Tile acc = tp::testing::accumulator_64(A, B, by * 64, bx * 64, K);
    copy(acc, C.tile(by * 64, bx * 64 + (shifted ? Expr(shift) : Expr(0))));
  };
  Params params = shifted ? Params{A, B, C, shift} : Params{A, B, C};
  return kernel("paired", params, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128), body);
}

constexpr uint64_t kC = 1 << 2;

} // namespace

TEST(PairedStore, InGeneralEachPairFallsBackToElementStores) {
  for (DType t : {bf16, f32}) {
    Lowered l = lower(gemm(t), 0);
    EXPECT_EQ(l.pair_stores, 1) << dtype_name(t);
    EXPECT_EQ(l.element_stores, 2) << dtype_name(t);
    EXPECT_EQ(l.paired_params, kC) << "a launch must learn that C takes paired stores";
  }
}

TEST(PairedStore, EvenRowsDropTheFallback) {
  for (DType t : {bf16, f32}) {
    Lowered l = lower(gemm(t), kC);
    EXPECT_EQ(l.aligned_pairs, 1) << dtype_name(t);
    EXPECT_EQ(l.pair_stores, 0) << dtype_name(t);
    EXPECT_EQ(l.element_stores, 0) << dtype_name(t);
  }
}

TEST(PairedStore, AColumnNotProvablyEvenKeepsTheFallback) {
  Lowered l = lower(gemm(bf16, true), kC);
  EXPECT_EQ(l.pair_stores, 1);
  EXPECT_EQ(l.aligned_pairs, 0);
  EXPECT_EQ(l.element_stores, 2);
}

TEST(PairedStore, OnlyTheDestinationsBitCounts) {
  Lowered l = lower(gemm(bf16), 0b011);
  EXPECT_EQ(l.element_stores, 2);
}

TEST(PairedStore, AStridedViewWithEvenRowsDropsTheFallbackToo) {
  Lowered view = lower(gemm(bf16, false, true), kC, kC);
  EXPECT_EQ(view.element_stores, 0);
  Lowered general = lower(gemm(bf16, false, true), 0, kC);
  EXPECT_EQ(general.element_stores, 2);
}

TEST(PairedStore, EvenRowsAreTheirOwnVariant) {
  passes::Target a = passes::Target::parse("sm_90a"), b = a;
  b.even_rows = kC;
  EXPECT_NE(a.str(), b.str()) << "the cache key (canonical IR + target) tells them apart";
}

// What a launch derives from its arguments: only paired parameters, and only with an even
// last extent (and, for a view, unit inner stride and even outer strides).
TEST(PairedStore, EvenRowParamsFollowTheArguments) {
  using D = std::vector<ir::ArgDesc>;
  auto arg = [](std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
    return ir::ArgDesc{bf16, std::move(shape), std::move(strides)};
  };
  const D contiguous = {arg({64, 64}), arg({64, 96}), arg({64, 96})};
  EXPECT_EQ(cuda::even_row_params(kC, contiguous), kC);
  EXPECT_EQ(cuda::even_row_params(0, contiguous), 0u) << "no paired store, no bit";
  EXPECT_EQ(cuda::even_row_params(kC, {arg({64, 64}), arg({64, 95}), arg({64, 95})}), 0u);
  EXPECT_EQ(cuda::even_row_params(kC, {arg({64, 64}), arg({64, 96}), arg({64, 96}, {120, 1})}), kC);
  EXPECT_EQ(cuda::even_row_params(kC, {arg({64, 64}), arg({64, 96}), arg({64, 96}, {121, 1})}), 0u)
      << "an odd row pitch misaligns every other row";
  EXPECT_EQ(cuda::even_row_params(kC, {arg({64, 64}), arg({64, 95}), arg({64, 95}, {120, 1})}), 0u)
      << "an odd row length puts the last pair's second element past the row";
  EXPECT_EQ(cuda::even_row_params(kC, {arg({64, 64}), arg({96, 64}), arg({64, 96}, {1, 64})}), 0u)
      << "a transposed view has no adjacent pairs";
}

// lower_for_shapes (the tuner's and the operators' estimate of what a launch compiles) takes the
// even variant exactly when C's rows are even.
TEST(PairedStore, LowerForShapesPicksTheVariantALaunchTakes) {
  Kernel k = gemm(bf16);
  auto shapes = [](int64_t n) {
    return std::vector<ir::ArgDesc>{{bf16, {128, 64}}, {bf16, {64, n}}, {bf16, {128, n}}};
  };
  EXPECT_EQ(
      cuda::lower_for_shapes(k, passes::Target::parse("sm_90a"), shapes(128)).target.even_rows, kC);
  EXPECT_EQ(
      cuda::lower_for_shapes(k, passes::Target::parse("sm_90a"), shapes(127)).target.even_rows, 0u);
}
