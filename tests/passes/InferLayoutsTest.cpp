// InferLayouts on tiny kernels: the decisions themselves (register or shared memory, the blocked
// thread layout chosen, why a fragment stays in shared memory, the reduction plan and the vector
// width of each global copy), read from LayoutInfo, never from generated source.
#include <gtest/gtest.h>

#include "ir/IRVisitor.h"
#include "passes/InferLayouts.h"
#include "tilepilot/lang.h"

using namespace tp;
using passes::FragmentLayout;
using Kind = passes::FragmentLayout::Kind;

namespace {

passes::Target sm90() {
  return passes::Target::parse("sm_90a");
}

/// A layout formula at constant thread and register (expressions fold constants).
int64_t val(const Expr& e) {
  auto v = e.as_int();
  EXPECT_TRUE(v) << "not a constant";
  return v ? *v : -1;
}

/// A condition at constant thread (comparisons fold to a bool immediate): 1, 0, or -1 if not
/// folded.
int64_t truth(const Expr& e) {
  const auto* i = ir::as<ir::IntImm>(e);
  EXPECT_TRUE(i) << "not a constant";
  return i ? i->value : -1;
}

/// The buffer allocated under `name` (fragments are named frag<N> in allocation order).
ir::Buffer buffer(const Kernel& k, int index) {
  std::vector<ir::Buffer> all;
  ir::for_each_stmt(k.node().body, [&](const ir::Stmt& s) {
    if (const auto* a = ir::as<ir::Allocate>(s)) all.push_back(a->buffer);
  });
  return all.at(index);
}

template <typename T>
std::vector<const T*> nodes(const Kernel& k) {
  std::vector<const T*> out;
  ir::for_each_stmt(k.node().body, [&](const ir::Stmt& s) {
    if (const auto* n = ir::as<T>(s)) out.push_back(n);
  });
  return out;
}

/// c = a + b over bm x bn tiles of bf16 tensors, as lesson 2.
Kernel elementwise(int64_t bm, int64_t bn, int threads_, DType t = bf16) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, t), B("B", {M, N}, t), C("C", {M, N}, t);
  return kernel("ew", {A, B, C}, grid(ceildiv(N, bn), ceildiv(M, bm)), threads(threads_),
                [&](Var bx, Var by) {
                  Tile a = alloc_fragment({bm, bn}, t), b = alloc_fragment({bm, bn}, t);
                  Tile c = alloc_fragment({bm, bn}, t);
                  copy(A.tile(by * bm, bx * bn), a);
                  copy(B.tile(by * bm, bx * bn), b);
                  parallel({bm, bn}, [&](Var i, Var j) { c(i, j) = a(i, j) + b(i, j); });
                  copy(c, C.tile(by * bm, bx * bn));
                });
}

/// Row reduction of whole rows of N elements, bm rows per block, into a 1-d output.
Kernel row_reduce(int64_t bm, int64_t N, int threads_, bool max_) {
  Dim M("M");
  Tensor X("X", {M, N}, bf16), R("R", {M}, f32);
  return kernel("rr", {X, R}, grid(ceildiv(M, bm)), threads(threads_), [&](Var by) {
    Tile x = alloc_fragment({bm, N}, f32), r = alloc_fragment({bm}, f32);
    copy(X.tile(by * bm, 0), x);
    if (max_)
      reduce_max(x, r, 1);
    else
      reduce_sum(x, r, 1);
    copy(r, R.tile(by * bm));
  });
}

// An element-wise fragment lives in registers, not shared memory, in a layout whose runs are
// 16 bytes of the tensors' bf16 (8 elements), threads adjacent along the row.
TEST(InferLayouts, ElementwiseFragmentsAreBlockedInRegisters) {
  Kernel k = elementwise(32, 128, 128);
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  for (int i = 0; i < 3; ++i) {
    ir::Buffer b = buffer(k, i);
    ASSERT_TRUE(l.in_registers(b)) << b->name;
    EXPECT_FALSE(l.in_shared(b)) << b->name;
    const FragmentLayout& f = l.fragment(b);
    EXPECT_EQ(f.kind, Kind::blocked);
    EXPECT_EQ(f.vec, 8);
    EXPECT_EQ(f.tn, 16); // 128 columns = 16 runs of 8: one run per thread along the row
    EXPECT_EQ(f.tm, 8);
    EXPECT_EQ(f.regs_per_thread(), 32);
  }
  EXPECT_TRUE(l.promoted.empty());
}

// The layout is a bijection from (thread, register) onto the tile, every run of vec registers
// is vec adjacent columns of one row, and adjacent threads hold adjacent runs.
TEST(InferLayouts, BlockedLayoutCoversTheTileOnceWithContiguousRuns) {
  for (auto [M, N, vec, threads_] : std::vector<std::tuple<int64_t, int64_t, int, int>>{
           {32, 128, 8, 128},
           {1, 8192, 8, 256},
           {5, 48, 4, 128},
           {3, 24, 8, 64},
           // Ragged last run blocks: 625, 125, 896 and 5 runs.
           {1, 5000, 8, 128},
           {2, 1000, 8, 128},
           {1, 7168, 8, 256},
           {1, 40, 8, 128}}) {
    FragmentLayout f = passes::choose_blocked({M, N}, 16 / vec, threads_);
    std::vector<int> seen(M * N, 0);
    for (int t = 0; t < threads_; ++t)
      for (int r = 0; r < f.regs_per_thread(); ++r) {
        Expr ok = f.valid(Expr(t), Expr(r));
        int64_t i = val(f.row(Expr(t), Expr(r)));
        int64_t j = val(f.col(Expr(t), Expr(r)));
        // A register outside the tile (a ragged row or run block) must be guarded by valid().
        if (i >= M || j >= N) {
          EXPECT_TRUE(ok.defined()) << "thread " << t << " register " << r;
          continue;
        }
        ASSERT_LT(i, M);
        ASSERT_LT(j, N);
        ++seen[i * N + j];
        if (r % f.vec != 0) {
          int64_t j0 = val(f.col(Expr(t), Expr(r - 1)));
          EXPECT_EQ(j, j0 + 1) << "run of thread " << t;
        }
      }
    for (int64_t e = 0; e < M * N; ++e)
      ASSERT_EQ(seen[e], 1) << M << "x" << N << " element " << e;
    if (f.tn > 1) // thread 1 holds the run after thread 0's first run
      EXPECT_EQ(val(f.col(Expr(1), Expr(0))), f.vec);
  }
}

// Runs that no power of two of threads divides, with fewer rows than thread rows, spread over
// more threads with a ragged last run block; where the runs divide, or the rows fill the
// thread rows, the layout is what it was.
TEST(InferLayouts, FewRowsOfOddRunsSpreadOverTheThreadsWithARaggedLastBlock) {
  FragmentLayout one = passes::choose_blocked({1, 5000}, 2, 128); // 625 runs
  EXPECT_EQ(one.tn, 128);
  EXPECT_EQ(one.tm, 1);
  EXPECT_EQ(one.col_runs(), 5);
  EXPECT_TRUE(one.ragged_cols());
  FragmentLayout two = passes::choose_blocked({2, 1000}, 2, 128); // 125 runs
  EXPECT_EQ(two.tn, 64);
  EXPECT_EQ(two.tm, 2);
  EXPECT_EQ(two.regs_per_thread(), 16);
  FragmentLayout cols = passes::choose_blocked({5000}, 2, 128);
  EXPECT_EQ(cols.kind, Kind::cols);
  EXPECT_TRUE(cols.same_as(one.cols()));
  // Unchanged: runs a power of two divides; enough rows for the thread rows.
  EXPECT_FALSE(passes::choose_blocked({1, 8192}, 2, 256).ragged_cols());
  FragmentLayout rows = passes::choose_blocked({128, 40}, 2, 128); // 5 runs, 128 rows
  EXPECT_EQ(rows.tn, 1);
  EXPECT_FALSE(rows.ragged_cols());
  // Whole runs only: a register past N is invalid for its whole run.
  EXPECT_EQ(truth(one.valid(Expr(127), Expr(32))), 0); // run 4 of thread 127: column 5112
  EXPECT_EQ(truth(one.valid(Expr(112), Expr(39))), 1); // column 4999
  EXPECT_EQ(truth(one.valid(Expr(113), Expr(32))), 0); // column 5000
}

// An f32 fragment read from a bf16 tensor takes runs of 8 (16 bytes of bf16); one touching only
// f32 tensors, runs of 4. A row of 300 has no run of 8: runs of 4.
TEST(InferLayouts, RunLengthFollowsTheNarrowestGlobalDtype) {
  EXPECT_EQ(passes::choose_blocked({4, 256}, 2, 128).vec, 8);
  EXPECT_EQ(passes::choose_blocked({4, 256}, 4, 128).vec, 4);
  EXPECT_EQ(passes::choose_blocked({4, 300}, 2, 128).vec, 4);
  Kernel k = elementwise(16, 64, 128, f32);
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  EXPECT_EQ(l.fragment(buffer(k, 0)).vec, 4);
}

// Every copy between a tensor and a blocked fragment moves runs as vectors: 16 bytes each.
TEST(InferLayouts, GlobalCopiesOfBlockedFragmentsAreVectorized) {
  Kernel k = elementwise(32, 128, 128);
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  std::vector<const ir::Copy*> copies = nodes<ir::Copy>(k);
  ASSERT_EQ(copies.size(), 3u);
  for (const ir::Copy* c : copies) {
    ASSERT_TRUE(l.copy_vector.count(c));
    EXPECT_EQ(l.copy_vector.at(c) * 2, 16); // 8 bf16
  }
}

// A row within one warp (32 columns of 8 = 4 threads per row) reduces by shuffles only; a row
// across 8 warps (8192 columns over 256 threads) adds the cross-warp step through 256 f32 of
// scratch; the result is the blocked layout's row vector.
TEST(InferLayouts, RowReductionPlans) {
  Kernel one_warp = row_reduce(32, 32, 128, false);
  passes::LayoutInfo l1 = passes::infer_layouts(one_warp.node(), sm90());
  const ir::Reduce* r1 = nodes<ir::Reduce>(one_warp).at(0);
  passes::ReducePlan p1 = passes::plan_reduce(l1.fragment(r1->src), 1);
  EXPECT_TRUE(p1.supported);
  EXPECT_EQ(p1.shuffle_masks, (std::vector<int>{1, 2}));
  EXPECT_TRUE(p1.cross_warp_masks.empty());
  EXPECT_EQ(p1.per_thread, 8);
  EXPECT_FALSE(l1.reduce_scratch.count(r1));
  EXPECT_TRUE(l1.fragment(r1->dst).same_as(l1.fragment(r1->src).rows()));

  Kernel wide = row_reduce(1, 8192, 256, true);
  passes::LayoutInfo l2 = passes::infer_layouts(wide.node(), sm90());
  const ir::Reduce* r2 = nodes<ir::Reduce>(wide).at(0);
  passes::ReducePlan p2 = passes::plan_reduce(l2.fragment(r2->src), 1);
  EXPECT_EQ(p2.shuffle_masks, (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(p2.cross_warp_masks, (std::vector<int>{32, 64, 128}));
  EXPECT_EQ(p2.per_thread, 32);
  ASSERT_TRUE(l2.reduce_scratch.count(r2));
  EXPECT_EQ(p2.scratch_elems, 256);
  EXPECT_EQ(l2.fragment(r2->dst).kind, Kind::rows);
}

// A column reduction combines the threads of a column: the high thread bits.
TEST(InferLayouts, ColumnReductionCombinesThreadRows) {
  FragmentLayout f = passes::choose_blocked({32, 128}, 2, 128); // 8 x 16 threads
  passes::ReducePlan p = passes::plan_reduce(f, 0);
  EXPECT_EQ(p.shuffle_masks, (std::vector<int>{16}));
  EXPECT_EQ(p.cross_warp_masks, (std::vector<int>{32, 64}));
  EXPECT_EQ(p.result.kind, Kind::cols);
  EXPECT_EQ(p.per_thread, 4);
}

// A fragment read transposed needs other threads' registers: it stays in shared memory, and
// the decision names the use; the fragments it does not touch stay in registers.
TEST(InferLayouts, TransposedAccessKeepsTheFragmentInShared) {
  Dim M("M");
  Tensor A("A", {M, 32}, f32), C("C", {M, 32}, f32);
  Kernel k = kernel("tr", {A, C}, grid(ceildiv(M, 32)), threads(128), [&](Var by) {
    Tile a = alloc_fragment({32, 32}, f32), c = alloc_fragment({32, 32}, f32);
    copy(A.tile(by * 32, 0), a);
    parallel({32, 32}, [&](Var i, Var j) { c(i, j) = a(j, i); });
    copy(c, C.tile(by * 32, 0));
  });
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  ir::Buffer a = buffer(k, 0), c = buffer(k, 1);
  EXPECT_TRUE(l.in_shared(a));
  ASSERT_TRUE(l.shared_reason.count(a->uid));
  EXPECT_NE(l.shared_reason.at(a->uid).find("other than its variables"), std::string::npos)
      << l.shared_reason.at(a->uid);
  EXPECT_TRUE(l.in_registers(c));
}

// A fragment that would take more than kMaxFragmentRegs registers per thread stays in shared
// memory, and the decision says how many it would take.
TEST(InferLayouts, OversizedFragmentStaysInShared) {
  Kernel k = elementwise(128, 256, 128); // 256 elements per thread
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  ir::Buffer a = buffer(k, 0);
  EXPECT_TRUE(l.in_shared(a));
  ASSERT_TRUE(l.shared_reason.count(a->uid));
  EXPECT_NE(l.shared_reason.at(a->uid).find("256 registers per thread"), std::string::npos)
      << l.shared_reason.at(a->uid);
}

// A gemm accumulator keeps its tensor-core layout (not a blocked one).
TEST(InferLayouts, AccumulatorLayoutsAreUnchanged) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  Kernel k = kernel("g", {A, B, C}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                    [&](Var bx, Var by) {
                      Tile As = alloc_shared({64, 32}, bf16), Bs = alloc_shared({32, 64}, bf16);
                      Tile acc = alloc_fragment({64, 64}, f32);
                      clear(acc);
                      copy(A.tile(by * 64, 0), As);
                      copy(B.tile(0, bx * 64), Bs);
                      gemm(As, Bs, acc);
                      copy(acc, C.tile(by * 64, bx * 64));
                    });
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  EXPECT_EQ(l.fragment(buffer(k, 2)).kind, Kind::wgmma_acc);
  passes::LayoutInfo l80 = passes::infer_layouts(k.node(), passes::Target::parse("sm_80"));
  EXPECT_EQ(l80.fragment(buffer(k, 2)).kind, Kind::mma_acc);
}

// A weight vector read as w(j) next to a blocked tile takes the tile's column layout; the
// per-row result of a reduction its row layout: all of an RMS-style kernel is in registers.
TEST(InferLayouts, RowAndColumnVectorsFollowTheTile) {
  Dim M("M");
  Tensor X("X", {M, 256}, bf16), W("W", {256}, bf16), Y("Y", {M, 256}, bf16);
  Kernel k = kernel("rv", {X, W, Y}, grid(ceildiv(M, 4)), threads(128), [&](Var by) {
    Tile x = alloc_fragment({4, 256}, f32), w = alloc_fragment({256}, f32);
    Tile s = alloc_fragment({4}, f32);
    copy(X.tile(by * 4, 0), x);
    copy(W.tile(0), w);
    reduce_sum(x, s, 1);
    parallel({4, 256}, [&](Var i, Var j) { x(i, j) = x(i, j) * s(i) * w(j); });
    copy(x, Y.tile(by * 4, 0));
  });
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  const FragmentLayout& x = l.fragment(buffer(k, 0));
  EXPECT_EQ(x.kind, Kind::blocked);
  EXPECT_TRUE(l.fragment(buffer(k, 1)).same_as(x.cols()));
  EXPECT_TRUE(l.fragment(buffer(k, 2)).same_as(x.rows()));
  EXPECT_TRUE(l.promoted.empty());
}

} // namespace

namespace {

// Fragments that fit one by one but not together: the largest blocked ones go to shared memory
// until the kernel's register fragments fit kMaxKernelFragmentRegs, and the reason says so.
TEST(InferLayouts, KernelRegisterBudgetSendsTheLargestToShared) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, f32), C("C", {M, N}, f32);
  Kernel k = kernel("budget", {A, C}, grid(ceildiv(M, 64)), threads(128), [&](Var by) {
    Tile a = alloc_fragment({64, 128}, f32), b = alloc_fragment({64, 128}, f32); // 64 each
    Tile c = alloc_fragment({64, 256}, f32);                                     // 128
    copy(A.tile(by * 64, 0), a);
    parallel({64, 128}, [&](Var i, Var j) { b(i, j) = a(i, j) * 2.0; });
    copy(b, C.tile(by * 64, 0));
    copy(A.tile(by * 64, 0), c);
    copy(c, C.tile(by * 64, 0));
  });
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  ir::Buffer a = buffer(k, 0), b = buffer(k, 1), c = buffer(k, 2);
  EXPECT_TRUE(l.in_registers(a));
  EXPECT_TRUE(l.in_registers(b));
  ASSERT_TRUE(l.in_shared(c));
  EXPECT_NE(l.shared_reason.at(c->uid).find("256 registers per thread"), std::string::npos)
      << l.shared_reason.at(c->uid);
}

} // namespace

namespace {

// A blocked seed that would meet an accumulator's row layout (x reads r(i), a row vector of
// the accumulator) is undone: x stays in shared memory, the reason names the layout it met, and
// the accumulator and its row vector keep their layouts.
TEST(InferLayouts, SeedMeetingAnAccumulatorRowVectorStaysInShared) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  Kernel k = kernel("meet", {A, B, C}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                    [&](Var bx, Var by) {
                      Tile As = alloc_shared({64, 32}, bf16), Bs = alloc_shared({32, 64}, bf16);
                      Tile acc = alloc_fragment({64, 64}, f32), x = alloc_fragment({64, 64}, f32);
                      Tile r = alloc_fragment({64}, f32);
                      clear(acc);
                      copy(A.tile(by * 64, 0), As);
                      copy(B.tile(0, bx * 64), Bs);
                      gemm(As, Bs, acc);
                      reduce_max(acc, r, 1);
                      copy(C.tile(by * 64, bx * 64), x);
                      parallel({64, 64}, [&](Var i, Var j) { x(i, j) = x(i, j) - r(i); });
                      copy(x, C.tile(by * 64, bx * 64));
                    });
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  EXPECT_EQ(l.fragment(buffer(k, 2)).kind, Kind::wgmma_acc);
  EXPECT_EQ(l.fragment(buffer(k, 4)).parent, Kind::wgmma_acc);
  ir::Buffer x = buffer(k, 3);
  ASSERT_TRUE(l.in_shared(x));
  EXPECT_NE(l.shared_reason.at(x->uid).find("would meet rows_of(wgmma_acc)"), std::string::npos)
      << l.shared_reason.at(x->uid);
}

} // namespace

// A 64-row gemm over 8 warps: wgmma on sm_90a splits rows over warpgroups (64 per warpgroup),
// so two warpgroups cannot share 64 rows; the gemm takes mma with warps 4 x 2 instead of the
// SIMT loop. The row max combines across the two warps of a row through shared scratch; the
// bf16 probabilities, which the 4 x 2 warps cannot feed to mma from registers, go through
// swizzled shared memory, and the second gemm is mma too.
TEST(InferLayouts, SixtyFourRowsOverTwoWarpgroupsTakeMma) {
  Dim M("M"), Nk("Nk");
  Tensor A("A", {M, 64}, bf16), B("B", {Nk, 64}, bf16), V("V", {Nk, 64}, bf16);
  Tensor O("O", {M, 64}, f32), Mx("Mx", {M}, f32);
  Kernel k =
      kernel("decode_like", {A, B, V, O, Mx}, grid(ceildiv(M, 64)), threads(256), [&](Var by) {
        Tile As = alloc_shared({64, 64}, bf16), Bs = alloc_shared({64, 64}, bf16);
        Tile Vs = alloc_shared({64, 64}, bf16);
        Tile s = alloc_fragment({64, 64}, f32), p = alloc_fragment({64, 64}, bf16);
        Tile o = alloc_fragment({64, 64}, f32), m = alloc_fragment({64}, f32);
        copy(A.tile(by * 64, 0), As);
        copy(B.tile(0, 0), Bs);
        copy(V.tile(0, 0), Vs);
        clear(o);
        gemm(As, Bs, s, {.trans_b = true, .clear = true});
        reduce_max(s, m, 1);
        parallel({64, 64}, [&](Var i, Var j) { p(i, j) = s(i, j) - m(i); });
        gemm(p, Vs, o);
        copy(o, O.tile(by * 64, 0));
        copy(m, Mx.tile(by * 64));
      });
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  for (const auto& [g, kind] : l.gemms)
    EXPECT_EQ(kind, passes::GemmKind::mma) << g->loc.str();
  const FragmentLayout& acc = l.fragment(buffer(k, 3));
  EXPECT_EQ(acc.kind, Kind::mma_acc);
  EXPECT_EQ(acc.warps_m, 4);
  EXPECT_EQ(acc.warps_n, 2);
  EXPECT_EQ(l.fragment(buffer(k, 6)).kind, Kind::rows);
  ir::Buffer p = buffer(k, 4);
  ASSERT_TRUE(l.promoted.count(p->uid));
  EXPECT_NE(l.shared_reason.at(p->uid).find("mma reads it from shared memory"), std::string::npos)
      << l.shared_reason.at(p->uid);
  EXPECT_EQ(l.shared_layout(p).kind, passes::SharedLayout::Kind::swizzled);
  // The row max: quad shuffles, then the two warps of each row through shared scratch.
  auto reduces = nodes<ir::Reduce>(k);
  ASSERT_EQ(reduces.size(), 1u);
  passes::ReducePlan rp = passes::plan_reduce(acc, 1);
  EXPECT_EQ(rp.shuffle_masks, (std::vector<int>{1, 2}));
  EXPECT_EQ(rp.cross_warp_masks, (std::vector<int>{32}));
  EXPECT_TRUE(l.reduce_scratch.count(reduces[0]));
  // Only the first warp of a row's pair stores it: thread 32 holds row 0 too, and does not.
  FragmentLayout rows = acc.rows();
  EXPECT_EQ(val(rows.row(Expr(0), Expr(0))), val(rows.row(Expr(32), Expr(0))));
  EXPECT_EQ(truth(rows.owner(Expr(0))), 1);
  EXPECT_EQ(truth(rows.owner(Expr(32))), 0);
  EXPECT_EQ(truth(rows.owner(Expr(64))), 1);
}

// An mma accumulator spreads over every warp of the block, whatever their count: a grid of
// warps_m x warps_n = warps, or no mma at all. (12 warps on a 256 x 128 tile once got a 1 x 8
// grid, and the four warps left over stored rows past the tile into the next block's output:
// bench_conv on the H200, 2026-12-05.)
TEST(InferLayouts, MmaAccumulatorUsesEveryWarp) {
  struct Case {
    int64_t bm, bn;
    int threads;
  };
  for (const Case& c : {Case{256, 128, 384}, Case{192, 128, 384}, Case{128, 96, 192},
                        Case{64, 64, 128}, Case{128, 128, 256}, Case{96, 64, 192}}) {
    Dim M("M"), N("N"), K("K");
    Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
    Kernel k =
        kernel("g", {A, B, C}, grid(ceildiv(N, c.bn), ceildiv(M, c.bm)), threads(c.threads),
               [&](Var bx, Var by) {
                 Tile As = alloc_shared({c.bm, 32}, bf16), Bs = alloc_shared({32, c.bn}, bf16);
                 Tile acc = alloc_fragment({c.bm, c.bn}, f32);
                 clear(acc);
                 copy(A.tile(by * c.bm, 0), As);
                 copy(B.tile(0, bx * c.bn), Bs);
                 gemm(As, Bs, acc);
                 copy(acc, C.tile(by * c.bm, bx * c.bn));
               });
    for (const char* arch : {"sm_80", "sm_90a"}) {
      passes::LayoutInfo l = passes::infer_layouts(k.node(), passes::Target::parse(arch));
      if (!l.in_registers(buffer(k, 2))) continue; // the SIMT loop's shared accumulator
      const auto& f = l.fragment(buffer(k, 2));
      if (f.kind != Kind::mma_acc) continue;
      EXPECT_EQ(f.warps_m * f.warps_n, c.threads / 32)
          << arch << " " << c.bm << "x" << c.bn << " over " << c.threads
          << " threads: " << f.warps_m << "x" << f.warps_n;
    }
  }
}

// wgmma takes every tile width N that is a multiple of 16 up to 256 (the device library wraps
// each one): a 176-key attention block once fell back to mma for its first gemm only, and the
// softmax between the two gemms then met two accumulator layouts (a layout conflict). Widths
// that are not a multiple of 16, or over 256, take mma.
TEST(InferLayouts, WgmmaTakesEveryMultipleOf16UpTo256) {
  for (int64_t n : {16, 48, 80, 112, 144, 160, 176, 208, 224, 240, 256, 24, 264}) {
    Dim M("M");
    Tensor A("A", {M, 64}, bf16), B("B", {64, n}, bf16), C("C", {M, n}, f32);
    Kernel k = kernel("wide", {A, B, C}, grid(ceildiv(M, 128)), threads(256), [&](Var by) {
      Tile as = alloc_shared({128, 64}, bf16), bs = alloc_shared({64, n}, bf16);
      Tile acc = alloc_fragment({128, n}, f32);
      copy(A.tile(by * 128, 0), as);
      copy(B.tile(0, 0), bs);
      gemm(as, bs, acc, {.clear = true});
      copy(acc, C.tile(by * 128, 0));
    });
    passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
    ASSERT_EQ(l.gemms.size(), 1u);
    const bool wrapped = n % 16 == 0 && n <= 256;
    EXPECT_EQ(l.gemms.begin()->second, wrapped ? passes::GemmKind::wgmma_ss : passes::GemmKind::mma)
        << "N = " << n;
  }
}

// A register A operand of wgmma is laid out like an accumulator along its K, which is not
// bounded by one instruction's width: K = 272 is 17 k16 steps. (The layout once asserted N <= 256,
// so a 272-key attention block was an internal error.)
TEST(InferLayouts, WgmmaRegisterOperandMayBeWiderThanOneInstruction) {
  FragmentLayout a = FragmentLayout::wgmma(128, 272, 2);
  EXPECT_EQ(a.kind, Kind::wgmma_acc);
  EXPECT_EQ(a.N, 272);
  EXPECT_EQ(a.slabs, 1);
}

// Two gemms whose first is wider than one wgmma (N = 272) and so runs as mma, its result the
// register A operand of a second that wgmma takes: the two accumulator layouts meet, and the
// error says which gemm fell back to mma and why.
TEST(InferLayouts, ConflictFromAnMmaFallbackSaysWhy) {
  Dim S("S");
  Tensor Q("Q", {S, 64}, bf16), K("K", {S, 64}, bf16), V("V", {S, 64}, bf16);
  Tensor O("O", {S, 64}, f32);
  Kernel k = kernel("wide_keys", {Q, K, V, O}, grid(ceildiv(S, 128)), threads(256), [&](Var bx) {
    Tile qs = alloc_shared({128, 64}, bf16), ks = alloc_shared({272, 64}, bf16);
    Tile vs = alloc_shared({272, 64}, bf16);
    Tile s = alloc_fragment({128, 272}, f32), p = alloc_fragment({128, 272}, bf16);
    Tile o = alloc_fragment({128, 64}, f32);
    copy(Q.tile(bx * 128, 0), qs);
    copy(K.tile(0, 0), ks);
    copy(V.tile(0, 0), vs);
    gemm(qs, ks, s, {.trans_b = true, .clear = true});
    copy(s, p);
    gemm(p, vs, o, {.clear = true});
    copy(o, O.tile(bx * 128, 0));
  });
  try {
    passes::infer_layouts(k.node(), sm90());
    ADD_FAILURE() << "no layout conflict";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layout conflict"), std::string::npos) << what;
    EXPECT_NE(what.find("runs as mma, not wgmma: its width N = 272 is not a multiple of 16 up "
                        "to 256"),
              std::string::npos)
        << what;
  }
}
