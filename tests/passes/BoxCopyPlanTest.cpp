// Pipeline plans for a copy of a 4-d box into a 2-d shared tile (the copy rule flattens the
// box's outer dimensions row-major): on sm_90a it is one TMA load whose box is the copy's box,
// innermost first, and the loop is warp-specialized as a plain 2-d tile load's would be; without
// TMA it is a prefetched cp.async copy.
#include <gtest/gtest.h>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "passes/FlattenLets.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"
#include "tilepilot/lang.h"

using namespace tp;

namespace {

/// A kernel's pipeline plan, with the (lets-flattened) kernel whose statements it points into.
struct Planned {
  ir::KernelNode node;
  passes::PipelinePlan plan;
};

Planned plan_for(const Kernel& k, const std::string& arch) {
  passes::Target t = passes::Target::parse(arch);
  Planned out{k.node(), {}};
  out.node.body = passes::flatten_lets(out.node.body);
  passes::LayoutInfo l = passes::infer_layouts(out.node, t);
  out.plan = passes::plan_pipeline(out.node, l, t);
  return out;
}

/// A pipelined gemm whose A tile is `rows` x `cols` pixels of an NHWC tensor, one box per step
/// at (kh, kw) - 1 (negative starts: the box hangs over the tensor's edge).
Kernel box_gemm(int64_t rows, int64_t cols) {
  Dim Nb("Nb"), P("P");
  const int64_t bm = rows * cols;
  Tensor X("X", {Nb, 64, 64, 128}, bf16), W("W", {1152, 128}, bf16), Y("Y", {P, 128}, f32);
  return kernel("box_gemm", {X, W, Y}, grid(1, ceildiv(P, bm)), threads(128), [&](Var, Var by) {
    Tile As = alloc_shared({bm, 64}, bf16), Bs = alloc_shared({64, 128}, bf16);
    Tile acc = alloc_fragment({bm, 128}, f32);
    clear(acc);
    Expr oh0 = by * bm / 64 % 64, ow0 = by * bm % 64;
    pipelined(18, 3, [&](Var k) {
      Expr kh = k / 6, kw = k / 2 % 3, c0 = k % 2 * 64;
      copy(X.tile({by * bm / 4096, oh0 + kh - 1, ow0 + kw - 1, c0}, {1, rows, cols, 64}), As);
      copy(W.tile(k * 64, 0), Bs);
      gemm(As, Bs, acc);
    });
    copy(acc, Y.tile(by * bm, 0));
  });
}

const passes::TmaLoad* load_of(const passes::PipelinePlan& p, const std::string& tensor) {
  for (const passes::TmaLoad& l : p.loads)
    if (l.copy->src.buffer->name == tensor) return &l;
  return nullptr;
}

} // namespace

// Two output rows of 64 pixels: the box [1, 2, 64, 64] is the TMA box {64, 64, 2, 1} (channels,
// columns, rows, image), 128-byte swizzled like a [128, 64] tile's, landing 128 x 64 x 2 bytes.
TEST(BoxCopyPlan, FlattenedBoxIsOneTmaLoadOfTheWarpSpecializedLoop) {
  Planned planned = plan_for(box_gemm(2, 64), "sm_90a");
  const passes::PipelinePlan& p = planned.plan;
  ASSERT_TRUE(p.warp_specialized) << p.reason;
  const passes::TmaLoad* x = load_of(p, "X");
  ASSERT_TRUE(x);
  EXPECT_TRUE(x->in_loop);
  EXPECT_EQ(x->box, (std::vector<int64_t>{64, 64, 2, 1}));
  EXPECT_EQ(x->swizzle_bytes, 128);
  EXPECT_EQ(x->boxes, 1);
  EXPECT_EQ(x->bytes, 128 * 64 * 2);
  const passes::TmaLoad* w = load_of(p, "W");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->box, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(w->boxes, 2); // 128 columns in two 128-byte swizzle rows
}

// Part of one output row (64 of its pixels): the box {64, 64, 1, 1}. The launch encodes the
// tensor map with that box, and the producer issues a 4-d TMA load with the box's four starts.
TEST(BoxCopyPlan, BoxWithinOneRowLowersToA4dTmaLoad) {
  Kernel k = box_gemm(1, 64);
  Planned planned = plan_for(k, "sm_90a");
  const passes::PipelinePlan& p = planned.plan;
  ASSERT_TRUE(p.warp_specialized) << p.reason;
  const passes::TmaLoad* x = load_of(p, "X");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->box, (std::vector<int64_t>{64, 64, 1, 1}));
  cuda::LoweredKernel lk = cuda::lower_kernel(k, passes::Target::parse("sm_90a"));
  bool encoded = false;
  for (const cuda::TmaParam& t : lk.tmas)
    encoded |= t.param == 0 && t.box == x->box;
  EXPECT_TRUE(encoded);
  EXPECT_NE(lk.source.find("tma_load_4d("), std::string::npos);
}

// Without TMA the same loop is a cp.async pipeline that prefetches the box copy.
TEST(BoxCopyPlan, FlattenedBoxIsPrefetchedWithoutTma) {
  Planned planned = plan_for(box_gemm(2, 64), "sm_80");
  const passes::PipelinePlan& p = planned.plan;
  EXPECT_FALSE(p.warp_specialized);
  ASSERT_TRUE(p.cp_async) << p.cp_async_reason;
  bool x = false;
  for (const ir::Copy* c : p.prefetched)
    x |= c->src.buffer->name == "X";
  EXPECT_TRUE(x);
}
