// TMA stores of gemm accumulators (PlanTmaStores.h, LowerTmaStore.cpp) on tiny kernels: which
// copies qualify and why the others do not, the box and chunks of a store, where its chunk
// buffers go in shared memory, which registers each chunk takes, and what the lowering issues.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include <tilepilot/tilepilot.h>

#include "LoweredBody.h"
#include "ir/IRVisitor.h"
#include "passes/InferLayouts.h"
#include "passes/LowerContext.h"
#include "passes/PlanPipeline.h"
#include "passes/PlanSharedMemory.h"

using namespace tp;

namespace {

struct Planned {
  passes::LayoutInfo layouts;
  passes::PipelinePlan plan;
  passes::SmemPlan smem;
};

Planned plan(const Kernel& k, const passes::Target& t) {
  Planned p;
  p.layouts = passes::infer_layouts(k.node(), t);
  p.plan = passes::plan_pipeline(k.node(), p.layouts, t);
  passes::plan_tma_stores(k.node(), p.layouts, t, p.plan);
  p.smem = passes::plan_shared_memory(k.node(), p.layouts, p.plan, t);
  return p;
}

passes::Target sm90() {
  return passes::Target::parse("sm_90a");
}

struct GemmOptions {
  int64_t bm = 128, bn = 256, bk = 64;
  int stages = 4, threads = 256;
  bool persistent = false;
  int64_t extra_shared = 0;   // bytes of one more shared tile (to leave no room)
  bool read_c_first = false;  // C is also read: a residual added to the accumulator
  bool annotate_off = false;  // annotate("tma_stores", "0")
  bool pipelined_loop = true; // false: a serial K loop (no warp specialization)
};

/// C = A B over bm x bn tiles, bf16 C (by default the GEMM's sm_90a tile: 128 x 256 x 64, 4
/// stages, two consumer warpgroups).
Kernel gemm(const GemmOptions& o) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, bf16);
  return kernel("g", {A, B, C}, grid(ceildiv(N, o.bn), ceildiv(M, o.bm)), threads(o.threads),
                [&](Var bx, Var by) {
                  if (o.annotate_off) annotate("tma_stores", "0");
                  if (o.persistent) annotate("persistent", "1");
                  Tile as = alloc_shared({o.bm, o.bk}, bf16), bs = alloc_shared({o.bk, o.bn}, bf16);
                  Tile acc = alloc_fragment({o.bm, o.bn}, f32);
                  if (o.extra_shared) {
                    Tile pad = alloc_shared({o.extra_shared / 2}, bf16);
                    fill(pad, 0);
                  }
                  if (o.read_c_first)
                    copy(C.tile(by * o.bm, bx * o.bn), acc);
                  else
                    clear(acc);
                  auto step = [&](Var k) {
                    copy(A.tile(by * o.bm, k * o.bk), as);
                    copy(B.tile(k * o.bk, bx * o.bn), bs);
                    gemm(as, bs, acc);
                  };
                  if (o.pipelined_loop)
                    pipelined(ceildiv(K, o.bk), o.stages, step);
                  else
                    serial(ceildiv(K, o.bk), step);
                  copy(acc, C.tile(by * o.bm, bx * o.bn));
                });
}

constexpr uint64_t kC = uint64_t{1} << 2;

// The default GEMM tile: one store of four 64-column chunks, 128 rows a box, its two chunk
// buffers (2 x 16 KiB) 1024-aligned after the four stages, within the limit.
TEST(PlanTmaStores, GemmAccumulatorIsStoredInChunks) {
  Planned p = plan(gemm({}), sm90());
  ASSERT_EQ(p.plan.stores.size(), 1u) << p.plan.store_note;
  const passes::TmaStore& s = p.plan.stores[0];
  EXPECT_EQ(s.param, 2);
  EXPECT_EQ(s.box, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(s.rows, 128);
  EXPECT_EQ(s.chunks, 4);
  EXPECT_EQ(p.plan.tma_store_candidates, kC);
  EXPECT_EQ(p.plan.store_staging_bytes(), 2 * 128 * 128);
  EXPECT_EQ(p.smem.store_staging % 1024, 0);
  EXPECT_GE(p.smem.store_staging, 4 * (128 * 64 + 64 * 256) * 2);
  EXPECT_LE(p.smem.store_staging + 2 * 128 * 128, p.smem.barrier_offset);
  EXPECT_LE(p.smem.total_bytes, sm90().smem_limit());
}

// The differential case AccumulatorTmaStoredAtEdgeTiles's kernel (one warpgroup, 64 x 64
// tiles, bk 32, 2 stages, bf16 C) takes the TMA store, so the GPU comparison runs it: one
// chunk of 64 rows, and no wait before it (nothing used the buffers).
TEST(PlanTmaStores, OneWarpgroupTileIsOneChunk) {
  Kernel k = gemm({.bm = 64, .bn = 64, .bk = 32, .stages = 2, .threads = 128});
  Planned p = plan(k, sm90());
  ASSERT_EQ(p.plan.stores.size(), 1u) << p.plan.store_note;
  EXPECT_EQ(p.plan.stores[0].box, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(p.plan.stores[0].chunks, 1);
  EXPECT_TRUE(p.plan.stores[0].first_use);
}

// A persistent kernel loops over tiles, so even a store's first chunks wait for the previous
// tile's reads: five waits for four chunks.
TEST(PlanTmaStores, PersistentStoresWaitBeforeEveryChunk) {
  Kernel k = gemm({.persistent = true});
  Planned p = plan(k, sm90());
  ASSERT_EQ(p.plan.stores.size(), 1u) << p.plan.store_note;
  EXPECT_FALSE(p.plan.stores[0].first_use);
  int waits = 0;
  ir::for_each_stmt(tp::testing::lowered_body(k, sm90()), [&](const ir::Stmt& st) {
    if (const auto* e = ir::as<ir::Evaluate>(st))
      if (const auto* call = ir::as<ir::Intrinsic>(e->value))
        waits += call->name.rfind("tp::sm90::tma_store_wait_read", 0) == 0;
  });
  EXPECT_EQ(waits, 5);
}

// A launch whose C rows are not 16-byte multiples clears C's bit: the copy stays a register
// store, C stays a candidate (what the launch checks), and the note says why.
TEST(PlanTmaStores, LaunchWithoutAlignedRowsKeepsRegisterStores) {
  passes::Target t = sm90();
  t.tma_store_params = ~kC;
  Planned p = plan(gemm({}), t);
  EXPECT_TRUE(p.plan.stores.empty());
  EXPECT_EQ(p.plan.tma_store_candidates, kC);
  EXPECT_NE(p.plan.store_note.find("16-byte aligned"), std::string::npos) << p.plan.store_note;
  EXPECT_EQ(p.smem.store_staging, -1);
}

// 4 stages of 48 KiB and 16 KiB more leave no room for 32 KiB of chunk buffers: no store, no
// user error, and the kernel keeps the shared memory it had.
TEST(PlanTmaStores, NoRoomKeepsRegisterStores) {
  Planned p = plan(gemm({.extra_shared = 16384}), sm90());
  EXPECT_TRUE(p.plan.stores.empty());
  EXPECT_NE(p.plan.store_note.find("no room"), std::string::npos) << p.plan.store_note;
  EXPECT_LE(p.smem.total_bytes, sm90().smem_limit());
}

TEST(PlanTmaStores, WhatDoesNotQualify) {
  struct Case {
    const char* name;
    Kernel k;
    passes::Target t;
    const char* note;
  };
  passes::Target notma = passes::Target::parse("sm_90a-notma");
  const Case cases[] = {
      {"annotation", gemm({.annotate_off = true}), sm90(), "tma_stores = 0"},
      {"C read too", gemm({.read_c_first = true}), sm90(), "elsewhere"},
      {"no TMA", gemm({}), notma, "not warp-specialized"},
      {"serial loop", gemm({.pipelined_loop = false}), sm90(), "not warp-specialized"},
  };
  for (const Case& c : cases) {
    Planned p = plan(c.k, c.t);
    EXPECT_TRUE(p.plan.stores.empty()) << c.name;
    EXPECT_NE(p.plan.store_note.find(c.note), std::string::npos)
        << c.name << ": " << p.plan.store_note;
  }
}

// An output of rank 4 ([B, S, H, D], a tile of 128 rows of S in one batch and head): the box
// keeps the unit extents, innermost first.
TEST(PlanTmaStores, BoxOfARankFourOutput) {
  Dim Bt("B"), S("S"), H("H"), K("K");
  Tensor A("A", {Bt, S, H, K}, bf16), W("W", {K, 128}, bf16), O("O", {Bt, S, H, 128}, bf16);
  Kernel k = kernel("r4", {A, W, O}, grid(ceildiv(S, 128), H, Bt), threads(256),
                    [&](Var bx, Var by, Var bz) {
                      Tile as = alloc_shared({128, 64}, bf16), ws = alloc_shared({64, 128}, bf16);
                      Tile acc = alloc_fragment({128, 128}, f32);
                      clear(acc);
                      pipelined(ceildiv(K, 64), 2, [&](Var kk) {
                        copy(A.tile({bz, bx * 128, by, kk * 64}, {1, 128, 1, 64}), as);
                        copy(W.tile(kk * 64, 0), ws);
                        gemm(as, ws, acc);
                      });
                      copy(acc, O.tile({bz, bx * 128, by, 0}, {1, 128, 1, 128}));
                    });
  Planned p = plan(k, sm90());
  ASSERT_EQ(p.plan.stores.size(), 1u) << p.plan.store_note;
  EXPECT_EQ(p.plan.stores[0].box, (std::vector<int64_t>{64, 1, 128, 1}));
  EXPECT_EQ(p.plan.stores[0].chunks, 2);
}

// Evaluates an expression of `t` and `q` (the thread and a pair's index) to a constant.
int64_t at(const Expr& e, const Var& t, int64_t tv, const Var& q, int64_t qv) {
  Expr v = passes::substitute(
      e, {{ir::as<ir::Variable>(t)->uid, Expr(tv)}, {ir::as<ir::Variable>(q)->uid, Expr(qv)}});
  const int64_t* i = v.as_int();
  EXPECT_NE(i, nullptr) << "not a constant";
  return i ? *i : -1;
}

// Chunk c's pairs of every thread are exactly the chunk's elements, each once: columns
// [64c, 64c + 64) of every row, over two warpgroups with two slabs each (256 x 128).
TEST(PlanTmaStores, ChunkPairsCoverTheirChunkOnce) {
  const passes::FragmentLayout l = passes::FragmentLayout::wgmma(256, 128, 2);
  Var t("t"), q("q");
  for (int64_t c = 0; c < 2; ++c) {
    std::set<std::pair<int64_t, int64_t>> seen;
    Expr r = l.chunk_pair_reg(64, c, q);
    for (int64_t tv = 0; tv < 256; ++tv)
      for (int64_t qv = 0; qv < l.chunk_pairs(64); ++qv)
        for (int64_t e = 0; e < 2; ++e) {
          int64_t row = at(l.row(t, r + e), t, tv, q, qv), col = at(l.col(t, r + e), t, tv, q, qv);
          EXPECT_EQ(col / 64, c) << "thread " << tv << " pair " << qv;
          EXPECT_TRUE(seen.insert({row, col}).second) << row << ", " << col << " twice";
        }
    EXPECT_EQ(seen.size(), 256u * 64u);
  }
}

// The lowering issues one TMA store and one commit per chunk, waits for the reads before each
// chunk that reuses a buffer and once at the end, and stores no element of C from registers.
TEST(PlanTmaStores, LoweringStoresEachChunkOnce) {
  Kernel k = gemm({});
  int stores = 0, commits = 0, waits = 0, element_stores = 0, pair_writes = 0;
  const uint64_t c_uid = k.node().params.at(2)->uid;
  ir::for_each_stmt(tp::testing::lowered_body(k, sm90()), [&](const ir::Stmt& st) {
    if (const auto* e = ir::as<ir::Evaluate>(st))
      if (const auto* call = ir::as<ir::Intrinsic>(e->value)) {
        stores += call->name == "tp::sm90::tma_store_2d";
        commits += call->name == "tp::sm90::tma_store_commit";
        waits += call->name.rfind("tp::sm90::tma_store_wait_read", 0) == 0;
        pair_writes += call->name == "tp::cg::sts_pair<tp::bf16>";
      }
    if (const auto* s = ir::as<ir::Store>(st)) element_stores += s->buffer->uid == c_uid;
  });
  EXPECT_EQ(stores, 4);
  EXPECT_EQ(commits, 4);
  EXPECT_EQ(waits, 3); // chunks 2 and 3 (the first two find their buffers unused), and the end
  EXPECT_EQ(pair_writes, 64); // 128 x 256 over 256 threads, in pairs
  EXPECT_EQ(element_stores, 0);
}

} // namespace
