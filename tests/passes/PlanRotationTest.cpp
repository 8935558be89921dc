// PlanRotation on tiny kernels: which consumer-filled gemm operand tiles of a warp-specialized
// loop get two buffers, what the barriers and shared memory then are, and every reason a tile
// keeps one buffer. The kernel is an int4-style GEMM: each iteration copies A and packed words,
// unpacks the words into the shared B tile, and multiplies. Checked on the plans themselves;
// the GPU halves (tests/codegen/GpuRotatedTilesTest.cpp, the w4a16 GPU tests) check results.
#include <gtest/gtest.h>

#include "ir/IRVisitor.h"
#include "passes/FlattenLets.h"
#include "passes/InferLayouts.h"
#include "passes/InsertBarriers.h"
#include "passes/PlanPipeline.h"
#include "passes/PlanSharedMemory.h"
#include "tilepilot/lang.h"

using namespace tp;

namespace {

struct Unpack {
  int offsets = 8;         // rows written per word (8: the whole B tile)
  bool read_after = false; // the B tile is copied out after the loop too
  int64_t bn = 128;        // B tile columns
  int stages = 3;
  Schedule schedule() const { return {.stages = stages}; }
};

Kernel unpack_gemm(const Unpack& u) {
  Dim M("M"), N("N"), K("K"), KW("KW");
  Tensor A("A", {M, K}, bf16), W("W", {KW, N}, i32), C("C", {M, N}, f32);
  return kernel("unpack_gemm", {A, W, C}, grid(ceildiv(N, u.bn), ceildiv(M, 128)), threads(256),
                [&](Var bx, Var by) {
                  Tile as = alloc_shared({128, 64}, bf16), bs = alloc_shared({64, u.bn}, bf16);
                  Tile ws = alloc_shared({8, u.bn}, i32);
                  Tile acc = alloc_fragment({128, u.bn}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, 64), u.schedule(), [&](Var k) {
                    copy(A.tile(by * 128, k * 64), as);
                    copy(W.tile(k * 8, bx * u.bn), ws);
                    parallel({8, u.bn}, [&](Var r, Var j) {
                      Var w = let("w", ws(r, j));
                      for (int i = 0; i < u.offsets; ++i)
                        bs(r * 8 + i, j) = cast(f32, ((w >> (4 * i)) & 15) - 8);
                    });
                    gemm(as, bs, acc);
                  });
                  if (u.read_after) copy(bs, C.tile(0, 0));
                  copy(acc, C.tile(by * 128, bx * u.bn));
                });
}

struct Planned {
  ir::KernelNode k;
  passes::LayoutInfo layouts;
  passes::PipelinePlan plan;
  std::string loop; // the pipelined loop's body: "|" barriers, "par", "gemm", copies left out
};

/// Lowering's order (Lower.cpp): plan, insert barriers, infer and plan again.
Planned plan_for(const Kernel& kernel, const std::string& arch = "sm_90a") {
  passes::Target t = passes::Target::parse(arch);
  ir::KernelNode kf = kernel.node();
  kf.body = passes::flatten_lets(kf.body);
  passes::LayoutInfo l0 = passes::infer_layouts(kf, t);
  passes::PipelinePlan p0 = passes::plan_pipeline(kf, l0, t);
  Planned out{kf, {}, {}, ""};
  out.k.body = passes::insert_barriers(kf, l0, p0);
  out.layouts = passes::infer_layouts(out.k, t);
  out.plan = passes::plan_pipeline(out.k, out.layouts, t);
  ir::for_each_stmt(out.k.body, [&](const ir::Stmt& s) {
    const auto* f = ir::as<ir::For>(s);
    if (!f || f->for_kind != ir::ForKind::pipelined) return;
    for (const ir::Stmt& b : ir::as<ir::Seq>(f->body)->stmts) {
      const auto* e = ir::as<ir::Evaluate>(b);
      const auto* i = e ? ir::as<ir::Intrinsic>(e->value) : nullptr;
      std::string t = i && i->name == "tp.barrier" ? "|"
                      : ir::as<ir::Parallel>(b)    ? "par"
                      : ir::as<ir::Gemm>(b)        ? "gemm"
                                                   : "";
      if (!t.empty()) out.loop += (out.loop.empty() ? "" : " ") + t;
    }
  });
  return out;
}

uint64_t uid_of(const ir::KernelNode& k, const std::string& name) {
  uint64_t uid = 0;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    if (const auto* a = ir::as<ir::Allocate>(s); a && a->buffer->name == name) uid = a->buffer->uid;
  });
  return uid;
}

} // namespace

// The B tile (shared1) is filled whole each iteration: two buffers, no barrier at the end of
// the body (the next fill writes the other buffer), one between the fill and the gemm.
TEST(PlanRotation, AWholeUnpackedTileRotatesAndDropsTheEndOfBodyBarrier) {
  Planned p = plan_for(unpack_gemm({}));
  ASSERT_TRUE(p.plan.warp_specialized) << p.plan.reason;
  const uint64_t bs = uid_of(p.k, "shared1");
  EXPECT_EQ(p.plan.rotated, std::set<uint64_t>{bs});
  EXPECT_EQ(p.loop, "par | gemm");
  passes::SmemPlan smem =
      passes::plan_shared_memory(p.k, p.layouts, p.plan, passes::Target::parse("sm_90a"));
  EXPECT_EQ(smem.slots.at(bs).stages, 2);
  EXPECT_EQ(smem.slots.at(uid_of(p.k, "shared0")).stages, 3); // A: the pipeline's stages
}

// Without rotation the same loop keeps one buffer and a barrier at the end of the body (the
// next iteration's fill must wait for this one's gemm).
TEST(PlanRotation, APartlyFilledTileKeepsOneBufferAndItsBarrier) {
  Planned p = plan_for(unpack_gemm({.offsets = 7}));
  ASSERT_TRUE(p.plan.warp_specialized);
  EXPECT_TRUE(p.plan.rotated.empty());
  EXPECT_EQ(p.loop, "par | gemm |");
  EXPECT_NE(p.plan.rotation_note.find("'shared1' keeps one buffer: the loop's work is not proven"),
            std::string::npos)
      << p.plan.rotation_note;
}

// A tile read after the loop would see the last iteration's buffer or the other one.
TEST(PlanRotation, ATileUsedOutsideTheLoopKeepsOneBuffer) {
  Planned p = plan_for(unpack_gemm({.read_after = true}));
  ASSERT_TRUE(p.plan.warp_specialized);
  EXPECT_TRUE(p.plan.rotated.empty());
  EXPECT_EQ(p.plan.rotation_note, "'shared1' keeps one buffer: it is used outside the loop too");
}

// Seven stages of A and the words (168 KB) and one 32 KB B tile fit in the 227 KB of an sm_90a
// block; a second B tile would not: one buffer, and `show` says why.
TEST(PlanRotation, ASecondBufferThatDoesNotFitIsNotTaken) {
  Planned fits = plan_for(unpack_gemm({.bn = 256, .stages = 3}));
  EXPECT_EQ(fits.plan.rotated.size(), 1u);
  Planned full = plan_for(unpack_gemm({.bn = 256, .stages = 7}));
  ASSERT_TRUE(full.plan.warp_specialized) << full.plan.reason;
  EXPECT_TRUE(full.plan.rotated.empty());
  EXPECT_NE(full.plan.rotation_note.find("would not fit"), std::string::npos);
}

// Rotation rides on the warp-specialized plan: sm_80 (cp.async, no producer) keeps one buffer.
TEST(PlanRotation, OnlyTheWarpSpecializedPlanRotates) {
  Planned p = plan_for(unpack_gemm({}), "sm_80");
  EXPECT_FALSE(p.plan.warp_specialized);
  EXPECT_TRUE(p.plan.rotated.empty());
}
