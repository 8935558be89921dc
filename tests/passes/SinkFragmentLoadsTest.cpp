// SinkFragmentLoads on tiny kernels: which fragments it sinks into accumulator loops (a
// residual read r(i, j)) and which it leaves (a bias vector, element-wise kernels, a tensor the
// kernel writes, a fragment used after the loop), and that the rewritten kernel computes
// exactly what the original does (both interpreted).
#include <gtest/gtest.h>

#include "GemmEpilogueKernels.h"
#include "ir/IRVisitor.h"
#include "passes/InferLayouts.h"
#include "passes/SinkFragmentLoads.h"

using namespace tp;

namespace {

passes::Target sm90() {
  return passes::Target::parse("sm_90a");
}

ir::Stmt sink(const Kernel& k) {
  return passes::sink_fragment_loads(k.node(), passes::infer_layouts(k.node(), sm90()));
}

/// Fragments still allocated, and copies into fragments, in a body.
int fragment_allocs(const ir::Stmt& body) {
  int n = 0;
  ir::for_each_stmt(body, [&](const ir::Stmt& s) {
    if (const auto* a = ir::as<ir::Allocate>(s)) n += a->buffer->scope == ir::Scope::fragment;
  });
  return n;
}

constexpr test::EpilogueTiles kSmall{64, 64, 32, 2, 128};

// The residual goes (its allocation and copy with it); the accumulator stays.
TEST(SinkFragmentLoads, ResidualOfAnAccumulatorLoopIsSunk) {
  Kernel k = test::epilogue_gemm(kSmall, {.scale = true, .residual = true});
  ir::Stmt s = sink(k);
  EXPECT_FALSE(s.same_as(k.node().body));
  EXPECT_EQ(fragment_allocs(k.node().body), 2);
  EXPECT_EQ(fragment_allocs(s), 1);
}

// A bias vector read as b(j) keeps its copy (its shared-memory form compiles without spills).
TEST(SinkFragmentLoads, BiasVectorIsNotSunk) {
  Kernel k = test::epilogue_gemm(kSmall, {.bias = true, .gelu = true});
  EXPECT_TRUE(sink(k).same_as(k.node().body));
}

// An element-wise kernel has no accumulator: its fragments keep their vectorized tile copies.
TEST(SinkFragmentLoads, ElementwiseKernelIsUnchanged) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {M, N}, bf16), C("C", {M, N}, bf16);
  Kernel k = kernel("ew", {A, B, C}, grid(ceildiv(N, 128), ceildiv(M, 32)), threads(128),
                    [&](Var bx, Var by) {
                      Tile a = alloc_fragment({32, 128}, f32), b = alloc_fragment({32, 128}, f32);
                      copy(A.tile(by * 32, bx * 128), a);
                      copy(B.tile(by * 32, bx * 128), b);
                      parallel({32, 128}, [&](Var i, Var j) { a(i, j) = a(i, j) + b(i, j); });
                      copy(a, C.tile(by * 32, bx * 128));
                    });
  EXPECT_TRUE(sink(k).same_as(k.node().body));
}

/// gemm into acc, r = R's tile, acc += r in a parallel loop; `write_r` also stores the result
/// to R itself, `reuse_r` copies r out after the loop.
Kernel residual_gemm(bool write_r, bool reuse_r) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), R("R", {M, N}, bf16);
  Tensor C("C", {M, N}, bf16);
  return kernel("res", {A, B, R, C}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                [&](Var bx, Var by) {
                  Tile As = alloc_shared({64, 32}, bf16), Bs = alloc_shared({32, 64}, bf16);
                  Tile acc = alloc_fragment({64, 64}, f32), r = alloc_fragment({64, 64}, f32);
                  clear(acc);
                  copy(A.tile(by * 64, 0), As);
                  copy(B.tile(0, bx * 64), Bs);
                  gemm(As, Bs, acc);
                  copy(R.tile(by * 64, bx * 64), r);
                  parallel({64, 64}, [&](Var i, Var j) { acc(i, j) = acc(i, j) + r(i, j); });
                  copy(acc, (write_r ? R : C).tile(by * 64, bx * 64));
                  if (reuse_r) copy(r, C.tile(by * 64, bx * 64));
                });
}

// Reading R at the loop instead of at the copy is only the same when nothing writes R, and
// dropping r only when nothing else reads it.
TEST(SinkFragmentLoads, WrittenTensorOrReusedFragmentIsNotSunk) {
  Kernel plain = residual_gemm(false, false);
  EXPECT_FALSE(sink(plain).same_as(plain.node().body));
  Kernel writes = residual_gemm(true, false), reuses = residual_gemm(false, true);
  EXPECT_TRUE(sink(writes).same_as(writes.node().body));
  EXPECT_TRUE(sink(reuses).same_as(reuses.node().body));
}

// The sunk kernel, interpreted, gives the original's result bit for bit at odd extents (the
// out-of-bounds elements of the residual read as 0 in both).
TEST(SinkFragmentLoads, SunkKernelComputesTheSame) {
  test::Epilogue e{.bias = true, .gelu = true, .scale = true, .residual = true};
  Kernel k = test::epilogue_gemm(kSmall, e);
  auto node = std::make_shared<ir::KernelNode>(k.node());
  node->body = sink(k);
  ASSERT_FALSE(node->body.same_as(k.node().body));
  Kernel sunk(node);
  const int64_t M = 77, N = 45, K = 133;
  HostTensor a(bf16, {M, K}), b(bf16, {K, N}), bias(bf16, {N}), r(bf16, {M, N});
  a.fill_random(1), b.fill_random(2), bias.fill_random(3), r.fill_random(4);
  HostTensor c0(bf16, {M, N}), c1(bf16, {M, N});
  c0.poison(), c1.poison();
  interpret(k, {a, b, bias, r, 0.5, c0});
  interpret(sunk, {a, b, bias, r, 0.5, c1});
  int64_t differ = 0;
  for (int64_t i = 0; i < M * N; ++i)
    differ += !(c0.get(i) == c1.get(i));
  EXPECT_EQ(differ, 0);
}

} // namespace
