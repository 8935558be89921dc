// The cp.async multistage plan on tiny kernels: which plan a pipelined loop gets per target
// (sm_80 and a 1-d copy on sm_90a: cp.async; the sm_90a gemm: still TMA warp-specialized), its
// stage count and staged tiles, the shared memory it needs (stages x tiles), and the reasons
// `show` prints when a loop stays serial.
#include <gtest/gtest.h>

#include "PipelinedGemv.h"
#include "compile/Lower.h"
#include "ops/gemm/GemmOp.h"
#include "passes/FlattenLets.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"
#include "passes/PlanSharedMemory.h"
#include "tilepilot/lang.h"

using namespace tp;

namespace {

struct Planned {
  ir::KernelNode kernel; // the planned IR: the plan points into it (prefetched copies, lets)
  passes::PipelinePlan plan;
  passes::SmemPlan smem;
};

Planned plan_for(const Kernel& k, const std::string& arch) {
  passes::Target t = passes::Target::parse(arch);
  Planned p{k.node(), {}, {}};
  p.kernel.body = passes::flatten_lets(p.kernel.body);
  passes::LayoutInfo l = passes::infer_layouts(p.kernel, t);
  p.plan = passes::plan_pipeline(p.kernel, l, t);
  p.smem = passes::plan_shared_memory(p.kernel, l, p.plan, t);
  return p;
}

Kernel gemm(int stages) {
  return ops::gemm_kernel(
      DType::bf16, "nn",
      {{"bm", 128}, {"bn", 128}, {"bk", 32}, {"stages", stages}, {"threads", 128}});
}

Kernel gemv(int stages) {
  return tp::testing::pipelined_gemv(stages);
}

/// A gemm whose A row comes from an index tile the loop itself fills (idx_in_loop), or from a
/// let of the loop's body (the column, from the loop variable).
Kernel indexed(bool idx_in_loop) {
  Dim M("M"), N("N"), K("K"), G("G");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32), Off("Off", {G}, i32);
  return kernel("indexed", {A, B, C, Off}, grid(ceildiv(N, 64), G), threads(128),
                [&](Var bx, Var by) {
                  Tile idx = alloc_shared({1}, i32);
                  Tile As = alloc_shared({64, 32}, bf16), Bs = alloc_shared({32, 64}, bf16);
                  Tile acc = alloc_fragment({64, 64}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, 32), 3, [&](Var k) {
                    Expr row, col = k * 32;
                    if (idx_in_loop) {
                      idx(0) = Off(by);
                      row = Expr(idx(0)) * 64;
                    } else {
                      row = Expr(Off(by)) * 64;
                      col = let("kcol", k * 32);
                    }
                    copy(A.tile(row, col), As);
                    copy(B.tile(k * 32, bx * 64), Bs);
                    gemm(As, Bs, acc);
                  });
                  copy(acc, C.tile(by * 64, bx * 64));
                });
}

// sm_80 has no TMA: the gemm's loop is a cp.async pipeline of the requested depth, with both
// tiles staged and shared memory for every stage.
TEST(PlanCpAsync, Sm80GemmIsCpAsyncWithEveryTileStaged) {
  for (int s : {2, 3, 4}) {
    Planned p = plan_for(gemm(s), "sm_80");
    EXPECT_FALSE(p.plan.warp_specialized);
    EXPECT_EQ(p.plan.reason, "no TMA on sm_80");
    ASSERT_TRUE(p.plan.cp_async) << p.plan.cp_async_reason;
    EXPECT_EQ(passes::plan_kind(p.plan), "cp.async multistage");
    EXPECT_EQ(p.plan.stages, s);
    ASSERT_EQ(p.plan.prefetched.size(), 2u);
    EXPECT_EQ(p.plan.staged.size(), 2u);
    for (const ir::Copy* c : p.plan.prefetched) {
      EXPECT_TRUE(p.plan.staged.count(c->dst.buffer->uid));
      EXPECT_EQ(p.smem.slot(c->dst.buffer).stages, s);
    }
    // A [128, 32] and B [32, 128] bf16: 8 KiB each per stage.
    EXPECT_EQ(p.smem.total_bytes, s * 2 * 128 * 32 * 2);
  }
}

// The sm_90a gemm keeps its TMA warp-specialized plan; the variant without TMA gets cp.async.
TEST(PlanCpAsync, Sm90aGemmStaysWarpSpecializedAndNoTmaVariantIsCpAsync) {
  Planned ws = plan_for(gemm(4), "sm_90a");
  EXPECT_TRUE(ws.plan.warp_specialized);
  EXPECT_FALSE(ws.plan.cp_async);
  EXPECT_EQ(passes::plan_kind(ws.plan), "tma-warp-specialized");
  Planned notma = plan_for(gemm(4), "sm_90a-notma");
  EXPECT_FALSE(notma.plan.warp_specialized);
  EXPECT_TRUE(notma.plan.cp_async) << notma.plan.cp_async_reason;
  EXPECT_EQ(notma.plan.stages, 4);
}

// On sm_90a a loop with a 1-d copy cannot be warp-specialized; it is a cp.async pipeline, the
// 1-d tile staged like the 2-d one.
TEST(PlanCpAsync, Sm90aLoopWithOneDimensionalCopyIsCpAsync) {
  Planned p = plan_for(gemv(3), "sm_90a");
  EXPECT_FALSE(p.plan.warp_specialized);
  EXPECT_NE(p.plan.reason.find("not a whole 2-d tile"), std::string::npos) << p.plan.reason;
  ASSERT_TRUE(p.plan.cp_async) << p.plan.cp_async_reason;
  EXPECT_EQ(p.plan.stages, 3);
  EXPECT_EQ(p.plan.staged.size(), 2u);
  // [16, 64] and [64] bf16 tiles, each stage 1024-byte aligned: 2048 + 1024 bytes per stage.
  EXPECT_EQ(p.smem.total_bytes, 3 * (2048 + 1024));
}

// stages = 1 asks for no overlap: serial, single-buffered.
TEST(PlanCpAsync, OneStageStaysSerialAndSingleBuffered) {
  Planned p = plan_for(gemm(1), "sm_80");
  EXPECT_FALSE(p.plan.cp_async);
  EXPECT_EQ(passes::plan_kind(p.plan), "serial");
  EXPECT_EQ(p.plan.cp_async_reason, "the loop asks for 1 stage");
  EXPECT_EQ(p.smem.total_bytes, 2 * 128 * 32 * 2);
}

// A copy whose offset reads a tile the loop writes cannot be issued ahead: the loop stays serial
// and single-buffered, and the reason names the copy and the tile.
TEST(PlanCpAsync, OffsetReadingATileTheLoopWritesKeepsTheLoopSerial) {
  Planned p = plan_for(indexed(true), "sm_80");
  EXPECT_FALSE(p.plan.cp_async);
  EXPECT_TRUE(p.plan.staged.empty());
  EXPECT_EQ(p.plan.cp_async_reason,
            "the copy from 'A' into 'shared1': its offsets read shared 'shared0', which the loop "
            "writes, so its value for a later iteration is not known yet");
  EXPECT_EQ(p.smem.total_bytes, 1024 + 4096 + 4096);
}

// A let of the loop's body that the copy's offset reads (a global table and the loop variable)
// is evaluated again for the prefetched iteration.
TEST(PlanCpAsync, LetOfTheBodyIsEvaluatedForThePrefetchedIteration) {
  Planned p = plan_for(indexed(false), "sm_80");
  ASSERT_TRUE(p.plan.cp_async) << p.plan.cp_async_reason;
  ASSERT_EQ(p.plan.prefetch_lets.size(), 1u);
  EXPECT_EQ(ir::as<ir::Variable>(p.plan.prefetch_lets[0]->var)->name, "kcol");
  // Issued in iteration k for iteration k + 2 (3 stages): the let's value at k + 2.
  cuda::LoweredKernel lk = cuda::lower_kernel(indexed(false), passes::Target::parse("sm_80"));
  EXPECT_NE(lk.source.find(" + 2) * 32)"), std::string::npos) << lk.source;
}

// A staged tile read after the loop would not say which stage it means: not cp.async.
TEST(PlanCpAsync, StagedTileReadAfterTheLoopKeepsTheLoopSerial) {
  Dim M("M"), K("K");
  Tensor A("A", {M, K}, bf16), O("O", {16, 64}, bf16);
  Kernel k = kernel("after", {A, O}, grid(1), threads(128), [&](Var) {
    Tile as = alloc_shared({16, 64}, bf16);
    Tile acc = alloc_fragment({16, 64}, f32);
    clear(acc);
    pipelined(ceildiv(K, 64), 2, [&](Var k) {
      copy(A.tile(0, k * 64), as);
      parallel({16, 64}, [&](Var i, Var j) { acc(i, j) = acc(i, j) + as(i, j); });
    });
    copy(as, O.tile(0, 0));
  });
  Planned p = plan_for(k, "sm_80");
  EXPECT_FALSE(p.plan.cp_async);
  EXPECT_NE(p.plan.cp_async_reason.find("is used outside the pipelined loop"), std::string::npos)
      << p.plan.cp_async_reason;
}

// `show --stage lowered` prints the plan, its depth and bytes per stage, and why the other plans
// were not taken.
TEST(PlanCpAsync, LoweredTextNamesThePlanAndTheReasons) {
  cuda::LoweredKernel a = cuda::lower_kernel(gemm(3), passes::Target::parse("sm_80"));
  EXPECT_NE(a.lowered_text.find("// pipelined loop: cp.async multistage, 3 stages, 16384 bytes "
                                "per stage\n//   not tma-warp-specialized: no TMA on sm_80\n"),
            std::string::npos)
      << a.lowered_text.substr(0, 2000);
  cuda::LoweredKernel s = cuda::lower_kernel(indexed(true), passes::Target::parse("sm_80"));
  EXPECT_NE(s.lowered_text.find("// pipelined loop: serial, 1 stage (asked for 3)\n"),
            std::string::npos);
  EXPECT_NE(s.lowered_text.find("//   not cp.async multistage: the copy from 'A'"),
            std::string::npos);
  cuda::LoweredKernel w = cuda::lower_kernel(gemm(4), passes::Target::parse("sm_90a"));
  EXPECT_NE(w.lowered_text.find("// pipelined loop: tma-warp-specialized, 4 stages"),
            std::string::npos);
}

} // namespace
