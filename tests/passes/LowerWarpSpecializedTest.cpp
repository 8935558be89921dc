// The warp-specialized lowering (LowerWarpSpecialized.cpp) on a tiny one-gemm kernel: what it
// decided, read from the device-library calls of the lowered body. How tiles are scheduled
// (a ticket counter, or pairs dealt in turn to clusters), how many consumer warps free each
// stage (the peer's too, in a cluster), how the CTAs of a cluster meet, and the register split
// between producer and consumers.
#include <gtest/gtest.h>

#include <map>
#include <tilepilot/tilepilot.h>

#include "LoweredBody.h"
#include "StagedTileAfterLoop.h"
#include "TwoGemmLoop.h"
#include "ir/IRVisitor.h"

using namespace tp;

namespace {

/// C = A B over 128 x 128 tiles in a pipeline of `stages` (3 unless asked), `threads` consumer
/// threads, with the kernel-level annotations and blocks per SM asked for (a K step of 32 from
/// three blocks on, so that the stages fit a block's share of shared memory).
Kernel one_gemm(int threads, bool persistent, bool cluster, int blocks_per_sm = 1, int stages = 3) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  return kernel(
      "one_gemm", {A, B, C}, grid(ceildiv(N, 128), ceildiv(M, 128)), tp::threads(threads),
      [&](Var bx, Var by) {
        if (persistent) annotate("persistent", "1");
        if (cluster) annotate("cluster", "2");
        const int64_t bk = blocks_per_sm >= 3 ? 32 : 64;
        Tile as = alloc_shared({128, bk}, bf16), bs = alloc_shared({bk, 128}, bf16);
        Tile acc = alloc_fragment({128, 128}, f32);
        clear(acc);
        pipelined(ceildiv(K, bk), stages, [&](Var k) {
          copy(A.tile(by * 128, k * bk), as);
          copy(B.tile(k * bk, bx * 128), bs);
          gemm(as, bs, acc);
        });
        copy(acc, C.tile(by * 128, bx * 128));
      },
      KernelOptions{.blocks_per_sm = blocks_per_sm});
}

/// The device-library calls of the lowered body: how often each name appears, the constant
/// arguments of the first call of each name, and every name in program order.
struct Calls {
  std::map<std::string, int> count;
  std::map<std::string, std::vector<int64_t>> first_args;
  std::vector<std::string> sequence;
  int n(const std::string& name) const { return count.count(name) ? count.at(name) : 0; }
};

Calls calls_of(const Kernel& k) {
  struct Collect : ir::IRVisitor {
    Calls out;
    using ir::IRVisitor::visit;
    void visit(const ir::Intrinsic* c) override {
      out.sequence.push_back(c->name);
      if (out.count[c->name]++ == 0)
        for (const Expr& a : c->args)
          if (const auto* i = ir::as<ir::IntImm>(a)) out.first_args[c->name].push_back(i->value);
      ir::IRVisitor::visit(c);
    }
  } v;
  v.visit(tp::testing::lowered_body(k, passes::Target::parse("sm_90a")));
  return v.out;
}

} // namespace

// Without annotations: one tile a block; the block's threads meet at a block barrier before
// the roles split, and each stage is freed by the block's own 8 consumer warps.
TEST(LowerWarpSpecialized, PlainBlockOwnsOneTile) {
  Calls c = calls_of(one_gemm(256, false, false));
  EXPECT_EQ(c.n("tp::cg::sched_next"), 0);
  EXPECT_EQ(c.n("tp::cg::cluster_sync"), 0);
  EXPECT_EQ(c.n("tp::block::sync"), 1);
  ASSERT_EQ(c.first_args["tp::cg::init_pipeline<3>"].size(), 1u);
  EXPECT_EQ(c.first_args["tp::cg::init_pipeline<3>"][0], 8);
  EXPECT_GT(c.n("tp::cg::warp_arrive"), 0);
}

// Persistent: the producer takes tickets from the launch's counter and the last block resets
// it; the consumers read each tile's index from the slot the producer posts.
TEST(LowerWarpSpecialized, PersistentBlocksTakeTickets) {
  Calls c = calls_of(one_gemm(256, true, false));
  EXPECT_EQ(c.n("tp::cg::sched_next"), 1);
  EXPECT_EQ(c.n("tp::cg::sched_finish"), 1);
  EXPECT_EQ(c.n("tp::cg::sched_post"), 1);
  EXPECT_EQ(c.n("tp::cg::sched_read"), 1);
  EXPECT_EQ(c.n("tp::cg::sched_dealt<2>"), 0);
  EXPECT_EQ(c.n("tp::cg::init_persistent"), 1);
}

// A cluster: each stage is freed by the consumer warps of both CTAs (remote arrivals), and the
// CTAs meet before any peer signals a barrier and again before either exits.
TEST(LowerWarpSpecialized, ClusterStagesWaitForBothBlocks) {
  Calls c = calls_of(one_gemm(256, false, true));
  EXPECT_EQ(c.first_args["tp::cg::init_pipeline<3>"][0], 16);
  EXPECT_GT(c.n("tp::cg::warp_arrive_cluster<2>"), 0);
  EXPECT_EQ(c.n("tp::cg::cluster_sync"), 2);
  EXPECT_EQ(c.n("tp::block::sync"), 0);
}

// Persistent clusters: no counter (the pair would have to agree on each ticket); the tiles are
// dealt in turn, and the rest of the persistent hand-over stays.
TEST(LowerWarpSpecialized, PersistentClustersAreDealtTiles) {
  Calls c = calls_of(one_gemm(256, true, true));
  EXPECT_EQ(c.n("tp::cg::sched_dealt<2>"), 1);
  EXPECT_EQ(c.n("tp::cg::sched_next"), 0);
  EXPECT_EQ(c.n("tp::cg::sched_finish"), 0);
  EXPECT_EQ(c.n("tp::cg::sched_post"), 1);
  EXPECT_EQ(c.n("tp::cg::sched_read"), 1);
  EXPECT_EQ(c.first_args["tp::cg::init_pipeline<3>"][0], 16);
  EXPECT_EQ(c.n("tp::cg::cluster_sync"), 2);
}

// A lone wgmma gemm keeps its group in flight into the next iteration and frees its stage
// there, one iteration late, while the producer fills another stage. With one stage there is
// no other: the producer would wait for the release and the release for the producer (random
// program 4418 hung an H100). So one stage waits for its gemm and frees the stage at once.
TEST(LowerWarpSpecialized, OneStageFreesItsStageInTheSameIteration) {
  Calls three = calls_of(one_gemm(256, false, false));
  EXPECT_GT(three.n("tp::warpgroup::wait_group<1>"), 0);
  Calls one = calls_of(one_gemm(256, false, false, 1, 1));
  EXPECT_EQ(one.n("tp::warpgroup::wait_group<1>"), 0);
  EXPECT_GT(one.n("tp::warpgroup::wait_group<0>"), 0);
  // In program order, every consumer release follows a full wait of the gemm's group.
  bool waited = false;
  int releases = 0;
  for (const std::string& name : one.sequence) {
    if (name == "tp::warpgroup::wait_group<0>") waited = true;
    if (name == "tp::cg::warp_arrive") {
      EXPECT_TRUE(waited) << "a stage freed before its gemm finished";
      ++releases;
    }
  }
  EXPECT_GT(releases, 0);
}

// The register rule (split_registers): the producer keeps 40 when the consumers still reach
// 240, else 24; the consumers take what is left of the registers the block was launched with:
// its threads times its share of the 65,536 (all of them, or 1 / blocks) rounded down to a
// multiple of 8 a thread. Asking for more hangs on the GPU (setmaxnreg.inc waits for registers
// the block's pool never gets): T = 128 at three blocks and T = 256 at two did, before the
// rounding was part of the rule.
TEST(LowerWarpSpecialized, RegisterSplitFollowsTheRule) {
  struct Want {
    int threads, producer, consumer, blocks = 1;
  };
  for (Want w : {Want{128, 40, 240}, Want{256, 24, 240}, Want{384, 24, 160}, Want{128, 24, 232, 2},
                 Want{256, 24, 104, 2}, Want{128, 24, 136, 3}, Want{128, 24, 104, 4}}) {
    Calls c = calls_of(one_gemm(w.threads, false, false, w.blocks));
    EXPECT_EQ(c.n("tp::warpgroup::setmaxnreg_dec<" + std::to_string(w.producer) + ">"), 1)
        << w.threads;
    EXPECT_EQ(c.n("tp::warpgroup::setmaxnreg_inc<" + std::to_string(w.consumer) + ">"), 1)
        << w.threads;
  }
}

namespace {

/// Two gemms a key block with element-wise work between (tests/support/TwoGemmLoop.h) over
/// two consumer warpgroups, with the deferred second gemm and ping-pong turns both asked for.
Kernel deferred_pingpong(bool persistent) {
  return tp::testing::two_gemm_loop({.stages = 2, .defer_last_gemm = true, .pingpong = true}, 256,
                                    persistent);
}

} // namespace

// The deferred second gemm with ping-pong: every issue of the tensor cores (a commit) happens
// inside a turn (after the warpgroup's named wait, before its arrival on the next one's
// barrier), and the turns balance: one hand-over before the tiles, one wait and one arrival per
// turn (the peeled first block, the loop's iteration, the last second gemm), and one last wait
// that takes the arrival left over at the end.
TEST(LowerWarpSpecialized, DeferredGemmTakesPingpongTurns) {
  for (bool persistent : {false, true}) {
    const std::vector<std::string> seq = calls_of(deferred_pingpong(persistent)).sequence;
    int waits = 0, passes = 0, commits = 0;
    bool in_turn = false, handed_over = false;
    for (const std::string& name : seq) {
      if (name == "tp::block::named_sync") {
        EXPECT_FALSE(in_turn) << "a turn waited for inside a turn";
        in_turn = true;
        ++waits;
      } else if (name == "tp::block::named_arrive") {
        // The first arrival outside a turn gives warpgroup 0 its first turn.
        if (!in_turn && !handed_over)
          handed_over = true;
        else
          EXPECT_TRUE(in_turn) << "an arrival outside a turn";
        in_turn = false;
        ++passes;
      } else if (name == "tp::warpgroup::commit_group") {
        EXPECT_TRUE(in_turn) << "a gemm issued outside a turn (persistent=" << persistent << ")";
        ++commits;
      }
    }
    EXPECT_TRUE(handed_over);
    EXPECT_EQ(commits, 4); // the first gemm twice (peeled, loop), the second twice (loop, last)
    EXPECT_EQ(waits, 4);   // three turns and the last wait
    EXPECT_EQ(passes, 4);  // the hand-over and three turns
  }
}

// A persistent kernel hands its loop's stages to the next tile's loads as the loop ends, so a
// staged tile used after the loop is a user error naming the tile and both places; without
// persistence the same kernel lowers (the tile is read from the loop's last stage).
TEST(LowerWarpSpecialized, PersistentKernelRefusesAStagedTileUsedAfterItsLoop) {
  auto after_loop = [](bool persistent) {
    return tp::difftest::staged_tile_used_after_loop(128, 128, 64, 256, 3, persistent);
  };
  EXPECT_NO_THROW(tp::testing::lowered_body(after_loop(false), passes::Target::parse("sm_90a")));
  try {
    tp::testing::lowered_body(after_loop(true), passes::Target::parse("sm_90a"));
    ADD_FAILURE() << "lowered without an error";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("is filled by the pipelined loop at "), std::string::npos) << m;
    EXPECT_NE(m.find("leave out persistent"), std::string::npos) << m;
  }
}
