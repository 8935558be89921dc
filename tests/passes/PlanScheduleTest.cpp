// Stated loop schedules (tp::Schedule) on tiny kernels: what the verifier refuses whatever the
// target (the loop's structure), what the pipeline plan refuses on a target with TMA (the
// kernel's structure stops the plan the request needs), what it leaves unapplied without TMA
// (the next plan down runs), and the plan each honoured request gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "PipelinedGemv.h"
#include "ShiftedGemm.h"
#include "TwoGemmLoop.h"
#include "ir/IRPrinter.h"
#include "ops/gemm/GemmOp.h"
#include "passes/FlattenLets.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"
#include "tilepilot/lang.h"

using namespace tp;

namespace {

passes::PipelinePlan plan_for(const Kernel& k, const std::string& arch) {
  passes::Target t = passes::Target::parse(arch);
  ir::KernelNode kn = k.node();
  kn.body = passes::flatten_lets(kn.body);
  passes::LayoutInfo l = passes::infer_layouts(kn, t);
  return passes::plan_pipeline(kn, l, t);
}

/// Two gemms per iteration with element-wise work between them (tests/support/TwoGemmLoop.h).
Kernel two_gemms(Schedule sc, int threads = 256) {
  return tp::testing::two_gemm_loop(sc, threads);
}

/// The one-gemm GEMM loop of the gemm operator's kernel shape, with a stated schedule.
Kernel one_gemm(Schedule sc, int threads = 128) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  return kernel("one_gemm", {A, B, C}, grid(ceildiv(N, 128), ceildiv(M, 128)), tp::threads(threads),
                [&](Var bx, Var by) {
                  Tile as = alloc_shared({128, 64}, bf16), bs = alloc_shared({64, 128}, bf16);
                  Tile acc = alloc_fragment({128, 128}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, 64), sc, [&](Var k) {
                    copy(A.tile(by * 128, k * 64), as);
                    copy(B.tile(k * 64, bx * 128), bs);
                    gemm(as, bs, acc);
                  });
                  copy(acc, C.tile(by * 128, bx * 128));
                });
}

/// The message of the user error `f` raises, or "" when it raises none.
template <class F>
std::string user_error_of(F f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

} // namespace

// defer_last_gemm on a loop whose work starts and ends with a gemm: on sm_90a the plan defers
// the last gemm; without TMA (sm_80, and the sm_90a variant for unaligned rows) the loop runs
// the cp.async plan and the plan says what was not applied.
TEST(PlanSchedule, DeferLastGemmIsHonouredWithTmaAndNotAppliedWithout) {
  Kernel k = two_gemms({.stages = 2, .defer_last_gemm = true});
  passes::PipelinePlan p = plan_for(k, "sm_90a");
  EXPECT_TRUE(p.warp_specialized);
  EXPECT_TRUE(p.defer_second_gemm);
  EXPECT_TRUE(p.not_applied.empty());
  for (const char* arch : {"sm_80", "sm_90a-notma"}) {
    passes::PipelinePlan q = plan_for(k, arch);
    EXPECT_FALSE(q.warp_specialized) << arch;
    EXPECT_FALSE(q.defer_second_gemm) << arch;
    EXPECT_TRUE(q.cp_async) << arch;
    EXPECT_NE(q.not_applied.find("defer_last_gemm not applied"), std::string::npos) << arch;
  }
  EXPECT_FALSE(plan_for(two_gemms({.stages = 2}), "sm_90a").defer_second_gemm);
}

// The structural rules are the verifier's, so the kernel is refused when it is built, for the
// interpreter as for every GPU target.
TEST(PlanSchedule, StructuralRulesAreUserErrorsAtTheLoop) {
  EXPECT_NE(user_error_of([] {
              two_gemms({.stages = 1, .defer_last_gemm = true});
            }).find("defer_last_gemm needs stages >= 2"),
            std::string::npos);
  EXPECT_NE(user_error_of([] {
              one_gemm({.stages = 3, .defer_last_gemm = true});
            }).find("this loop has 1 gemm"),
            std::string::npos);
  EXPECT_NE(user_error_of([] {
              two_gemms({.stages = 2, .pingpong = true}, 128);
            }).find("pingpong needs two or more consumer warpgroups"),
            std::string::npos);
  EXPECT_NE(user_error_of([] {
              one_gemm({.stages = 2, .pingpong = true}, 256);
            }).find("exactly two gemms"),
            std::string::npos);
  EXPECT_NE(user_error_of([] {
              one_gemm({.stages = 1, .copies = Schedule::Copies::cp_async});
            }).find("copies = cp_async with stages = 1"),
            std::string::npos);
  // The error points at the loop in the file that writes it.
  EXPECT_NE(user_error_of([] {
              two_gemms({.stages = 1, .defer_last_gemm = true});
            }).find("TwoGemmLoop.h"),
            std::string::npos);
}

// pingpong with two warpgroups is taken on sm_90a.
TEST(PlanSchedule, PingpongWithTwoWarpgroupsIsTaken) {
  passes::PipelinePlan p = plan_for(two_gemms({.stages = 2, .pingpong = true}), "sm_90a");
  EXPECT_TRUE(p.warp_specialized);
  EXPECT_TRUE(p.pingpong);
  EXPECT_FALSE(p.defer_second_gemm);
}

// copies = cp_async keeps TMA out on sm_90a, where automatic takes it.
TEST(PlanSchedule, CpAsyncRequestedOnSm90aIsCpAsync) {
  passes::PipelinePlan automatic = plan_for(one_gemm({.stages = 3}), "sm_90a");
  EXPECT_TRUE(automatic.warp_specialized);
  passes::PipelinePlan p =
      plan_for(one_gemm({.stages = 3, .copies = Schedule::Copies::cp_async}), "sm_90a");
  EXPECT_FALSE(p.warp_specialized);
  EXPECT_EQ(p.reason, "the loop asks for copies = cp_async");
  EXPECT_TRUE(p.cp_async);
  EXPECT_EQ(p.stages, 3);
  EXPECT_EQ(p.prefetched.size(), 2u);
}

// copies = tma on a loop with a 1-d copy: on sm_90a the error names the copy that TMA cannot
// take; on sm_80 the cp.async plan runs and the plan says the request was not applied. The
// same loop with automatic copies quietly takes cp.async on both.
TEST(PlanSchedule, TmaRequestTheLoopCannotMeetIsAnErrorOnlyWhereTmaExists) {
  Kernel tma = tp::testing::pipelined_gemv({.stages = 3, .copies = Schedule::Copies::tma});
  std::string e = user_error_of([&] { plan_for(tma, "sm_90a"); });
  EXPECT_NE(e.find("copies = tma needs the TMA warp-specialized pipeline"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot use TMA"), std::string::npos) << e;
  passes::PipelinePlan p80 = plan_for(tma, "sm_80");
  EXPECT_TRUE(p80.cp_async);
  EXPECT_NE(p80.not_applied.find("copies = tma not applied: no TMA on sm_80"), std::string::npos)
      << p80.not_applied;
  passes::PipelinePlan a = plan_for(tp::testing::pipelined_gemv(3), "sm_90a");
  EXPECT_TRUE(a.cp_async);
  EXPECT_TRUE(a.not_applied.empty());
}

// copies = cp_async on a loop whose staged tile is read after the loop: the cp.async plan
// cannot say which stage that read means, so the request is an error with that reason.
TEST(PlanSchedule, CpAsyncRequestTheLoopCannotMeetIsAnError) {
  Dim M("M"), K("K");
  Tensor A("A", {M, K}, bf16), Y("y", {M, 64}, f32);
  Kernel k = kernel("staged_after", {A, Y}, grid(ceildiv(M, 16)), threads(128), [&](Var by) {
    Tile as = alloc_shared({16, 64}, bf16);
    Tile acc = alloc_fragment({16, 64}, f32);
    clear(acc);
    pipelined(ceildiv(K, 64), {.stages = 2, .copies = Schedule::Copies::cp_async}, [&](Var k) {
      copy(A.tile(by * 16, k * 64), as);
      parallel({16, 64}, [&](Var i, Var j) { acc(i, j) = acc(i, j) + as(i, j); });
    });
    parallel({16, 64}, [&](Var i, Var j) { acc(i, j) = acc(i, j) + as(i, j); });
    copy(acc, Y.tile(by * 16, 0));
  });
  std::string e = user_error_of([&] { plan_for(k, "sm_80"); });
  EXPECT_NE(e.find("copies = cp_async cannot be honoured"), std::string::npos) << e;
  EXPECT_NE(e.find("used outside the pipelined loop"), std::string::npos) << e;
}

// A kernel-level persistent request on a kernel the warp-specialized plan cannot take is an
// error on sm_90a (before, it was dropped without a word) and not applied on sm_80.
TEST(PlanSchedule, PersistentRequestNeedsTheWarpSpecializedPlan) {
  Dim M("M"), K("K");
  Tensor A("A", {M, K}, bf16), X("x", {K}, bf16), Y("y", {M}, f32);
  Kernel k = kernel("gemv_persistent", {A, X, Y}, grid(ceildiv(M, 16)), threads(128), [&](Var by) {
    annotate("persistent", "1");
    Tile as = alloc_shared({16, 64}, bf16), xs = alloc_shared({64}, bf16);
    Tile part = alloc_fragment({16, 64}, f32), y = alloc_fragment({16}, f32);
    clear(part);
    pipelined(ceildiv(K, 64), 2, [&](Var k) {
      copy(A.tile(by * 16, k * 64), as);
      copy(X.tile(k * 64), xs);
      parallel({16, 64}, [&](Var i, Var j) { part(i, j) = part(i, j) + as(i, j) * xs(j); });
    });
    reduce_sum(part, y, 1);
    copy(y, Y.tile(by * 16));
  });
  std::string e = user_error_of([&] { plan_for(k, "sm_90a"); });
  EXPECT_NE(e.find("persistent=1 needs the TMA warp-specialized pipeline"), std::string::npos) << e;
  EXPECT_NE(plan_for(k, "sm_80").not_applied.find("persistent=1 not applied"), std::string::npos);
}

/// A GEMM-shaped kernel in 2-block clusters along y whose loop runs `trips(by)` times.
Kernel clustered_gemm(const std::function<Expr(Var, Dim)>& trips, bool persistent) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  return kernel("clustered", {A, B, C}, grid(ceildiv(N, 128), ceildiv(M, 128)), threads(256),
                [&](Var bx, Var by) {
                  annotate("cluster", "2");
                  if (persistent) annotate("persistent", "1");
                  Tile as = alloc_shared({128, 64}, bf16), bs = alloc_shared({64, 128}, bf16);
                  Tile acc = alloc_fragment({128, 128}, f32);
                  clear(acc);
                  pipelined(trips(by, K), 3, [&](Var k) {
                    copy(A.tile(by * 128, k * 64), as);
                    copy(B.tile(k * 64, bx * 128), bs);
                    gemm(as, bs, acc);
                  });
                  copy(acc, C.tile(by * 128, bx * 128));
                });
}

// Clusters with and without persistence: B's load is multicast; persistence is planned with
// the cluster (its pairs take tiles together). A loop whose trip count reads the y block index
// could differ between the pair's blocks, and a multicast stage waits for both: refused.
TEST(PlanSchedule, ClusterNeedsTheSameTripCountInBothBlocks) {
  auto full = [](Var, Dim K) { return ceildiv(K, 64); };
  for (bool persistent : {false, true}) {
    passes::PipelinePlan p = plan_for(clustered_gemm(full, persistent), "sm_90a");
    EXPECT_EQ(p.cluster, 2);
    EXPECT_EQ(p.persistent, persistent);
    EXPECT_EQ(std::count_if(p.loads.begin(), p.loads.end(), [](auto& l) { return l.multicast; }),
              1);
  }
  auto causal = [](Var by, Dim K) { return min(ceildiv(K, 64), by * 2 + 2); };
  std::string e = user_error_of([&] { plan_for(clustered_gemm(causal, true), "sm_90a"); });
  EXPECT_NE(e.find("cluster=2 needs the pipelined loop to run the same number of times"),
            std::string::npos)
      << e;
}

// The schedule is part of the kernel's IR text, so the kernel cache tells two schedules of one
// loop apart; the automatic default prints as before.
TEST(PlanSchedule, ScheduleIsPartOfTheIrText) {
  std::string plain = ir::to_string(one_gemm({.stages = 3}).node());
  std::string cp =
      ir::to_string(one_gemm({.stages = 3, .copies = Schedule::Copies::cp_async}).node());
  EXPECT_NE(plain.find("stages=3)"), std::string::npos) << plain;
  EXPECT_NE(cp.find("stages=3, copies=cp_async)"), std::string::npos) << cp;
  std::string both = ir::to_string(two_gemms({.stages = 2, .defer_last_gemm = true}).node());
  EXPECT_NE(both.find("defer_last_gemm"), std::string::npos);
}

// The schedules that were kernel annotations say where they went.
TEST(PlanSchedule, OldScheduleAnnotationsNameTheLoopField) {
  Dim M("M");
  Tensor A("A", {M}, f32);
  for (auto [key, field] : {std::pair{"overlap", ".defer_last_gemm = true"},
                            std::pair{"pingpong", ".pingpong = true"}}) {
    std::string e = user_error_of(
        [&] { kernel("k", {A}, grid(1), threads(128), [&](Var) { annotate(key, "1"); }); });
    EXPECT_NE(e.find("is a loop schedule, not a kernel annotation"), std::string::npos) << e;
    EXPECT_NE(e.find(field), std::string::npos) << e;
  }
}

// A TMA box starts on the tensor's 16-byte grid: a tile whose first column is provably a
// multiple of 16 bytes takes TMA, negative offsets and odd row offsets included; one that is
// not (random program 4828: an illegal instruction on an H100) runs the next plan down, and
// the plan says which copy and why.
TEST(PlanSchedule, TmaBoxesStartOnSixteenBytes) {
  for (int64_t shift : {0, 8, -8, -64}) {
    passes::PipelinePlan p = plan_for(tp::difftest::shifted_gemm(shift, 3), "sm_90a");
    EXPECT_TRUE(p.warp_specialized) << "shift " << shift << ": " << p.reason;
  }
  for (int64_t shift : {-13, 3, 4}) {
    passes::PipelinePlan p = plan_for(tp::difftest::shifted_gemm(shift, 3), "sm_90a");
    EXPECT_FALSE(p.warp_specialized) << "shift " << shift;
    EXPECT_NE(p.reason.find("not provably a multiple of 16 bytes"), std::string::npos) << p.reason;
    EXPECT_TRUE(p.cp_async) << "shift " << shift;
  }
}
