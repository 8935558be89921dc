// The lowering of a global -> register fragment copy, on tiny kernels: a thread that loads
// several runs issues every run's load (tp::cg::ld_issue) before it takes any into registers
// (tp::cg::ld_take), so no run waits for another's round trip to memory; a thread with one or
// two runs loads each in one call (ld_vec), which needs no staging registers (two-phase loads
// of two runs measured slower on the H200). Where a warp's adjacent lanes hold adjacent 16-byte
// runs of a row and the kernel asks (annotate("row_lanes", ...)), the calls are the _lanes
// forms, which move an unaligned row as aligned blocks shared by shuffles. Checked on the
// lowered statements, in program order.
#include <gtest/gtest.h>

#include <algorithm>

#include <tilepilot/tilepilot.h>

#include "LoweredBody.h"
#include "ir/IRVisitor.h"

using namespace tp;

namespace {

/// The device-library calls of a kernel's lowered body, in program order (names without their
/// template arguments).
std::vector<std::string> lowered_calls(const Kernel& kernel, const std::string& arch = "sm_90a",
                                       bool with_template_args = false) {
  std::vector<std::string> out;
  ir::for_each_stmt(
      tp::testing::lowered_body(kernel, passes::Target::parse(arch)), [&](const ir::Stmt& st) {
        if (const auto* e = ir::as<ir::Evaluate>(st))
          if (const auto* c = ir::as<ir::Intrinsic>(e->value))
            if (c->name.rfind("tp::cg::", 0) == 0)
              out.push_back(with_template_args ? c->name : c->name.substr(0, c->name.find('<')));
      });
  return out;
}

/// out = x + 1 over [rows, cols] tiles of a bf16 tensor, in f32 fragments, with 128 threads.
/// `row_lanes`: the annotation's value, or -1 for none.
Kernel add_one(int64_t rows, int64_t cols, DType dt = bf16, int row_lanes = -1) {
  Dim M("M"), N("N");
  Tensor X("X", {M, N}, dt), Y("Y", {M, N}, dt);
  return kernel("add_one", {X, Y}, grid(ceildiv(N, cols), ceildiv(M, rows)), threads(128),
                [&](Var bx, Var by) {
                  if (row_lanes >= 0) annotate("row_lanes", std::to_string(row_lanes));
                  Tile x = alloc_fragment({rows, cols}, f32);
                  copy(X.tile(by * rows, bx * cols), x);
                  parallel({rows, cols}, [&](Var i, Var j) { x(i, j) = x(i, j) + 1.0; });
                  copy(x, Y.tile(by * rows, bx * cols));
                });
}

std::vector<std::string> only(const std::vector<std::string>& calls, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& c : calls)
    if (c.rfind(prefix, 0) == 0) out.push_back(c);
  return out;
}

} // namespace

// 32 x 128 over 128 threads: 32 elements, 4 runs of 8, per thread.
TEST(LowerCopy, SeveralRunsIssueEveryLoadBeforeTakingAny) {
  std::vector<std::string> loads = only(lowered_calls(add_one(32, 128)), "tp::cg::ld_");
  // Each run's call appears once in the (unrolled-later) loop body: issue, then take.
  ASSERT_EQ(loads, (std::vector<std::string>{"tp::cg::ld_issue", "tp::cg::ld_take"}));
}

// 8 x 128 and 16 x 128 over 128 threads: one and two runs of 8 per thread, each loaded in one
// call.
TEST(LowerCopy, OneOrTwoRunsLoadInOneCallEach) {
  for (int64_t rows : {8, 16}) {
    std::vector<std::string> loads = only(lowered_calls(add_one(rows, 128)), "tp::cg::ld_");
    EXPECT_EQ(loads, (std::vector<std::string>{"tp::cg::ld_vec"})) << rows << " rows";
  }
}

// Three runs a thread (24 x 128) are the first to take the two phases.
TEST(LowerCopy, ThreeRunsTakeTheTwoPhases) {
  std::vector<std::string> loads = only(lowered_calls(add_one(24, 128)), "tp::cg::ld_");
  EXPECT_EQ(loads, (std::vector<std::string>{"tp::cg::ld_issue", "tp::cg::ld_take"}));
}

// Stores take no staging: one st_vec per run.
TEST(LowerCopy, StoresAreOneCallPerRun) {
  std::vector<std::string> calls = lowered_calls(add_one(32, 128));
  EXPECT_EQ(only(calls, "tp::cg::st_"), (std::vector<std::string>{"tp::cg::st_vec"}));
}

// The lanes that move runs together are the layout's thread columns, up to a warp: a 128-column
// bf16 tile over 128 threads has 16 runs of 8 a row (16 lanes), a 256-column one 32, and an f32
// tensor's 16-byte runs are 4 elements (a 128-column tile: 32 columns of threads, one warp).
// A tile one run wide has no two lanes in a row: its runs go alone, as ld_vec and st_vec.
// (row_lanes = 3: both directions.)
TEST(LowerCopy, LanesTogetherAreTheThreadColumnsOfAWarp) {
  auto calls = [](const Kernel& k, const std::string& prefix) {
    return only(lowered_calls(k, "sm_90a", true), prefix);
  };
  EXPECT_EQ(calls(add_one(16, 128, bf16, 3), "tp::cg::st_vec"),
            (std::vector<std::string>{"tp::cg::st_vec_lanes<8, 16>"}));
  EXPECT_EQ(calls(add_one(16, 256, bf16, 3), "tp::cg::st_vec"),
            (std::vector<std::string>{"tp::cg::st_vec_lanes<8, 32>"}));
  EXPECT_EQ(calls(add_one(16, 128, f32, 3), "tp::cg::st_vec"),
            (std::vector<std::string>{"tp::cg::st_vec_lanes<4, 32>"}));
  EXPECT_EQ(calls(add_one(128, 8, bf16, 3), "tp::cg::st_vec"),
            (std::vector<std::string>{"tp::cg::st_vec<8>"}));
  EXPECT_EQ(calls(add_one(128, 8, bf16, 3), "tp::cg::ld_"),
            (std::vector<std::string>{"tp::cg::ld_vec<8>"}));
}

// The row_lanes annotation picks the directions whose runs go by lanes (1 loads, 2 stores, 3
// both; 0 neither, the default), so that the forms can run side by side.
TEST(LowerCopy, RowLanesAnnotationPicksTheDirections) {
  auto forms = [](int row_lanes) {
    return only(lowered_calls(add_one(32, 128, bf16, row_lanes)), "tp::cg::");
  };
  auto has = [](const std::vector<std::string>& calls, const std::string& c) {
    return std::find(calls.begin(), calls.end(), c) != calls.end();
  };
  for (int v : {-1, 0, 1, 2, 3}) { // -1: no annotation
    std::vector<std::string> c = forms(v);
    const int bits = std::max(v, 0);
    EXPECT_EQ(has(c, "tp::cg::ld_issue_lanes"), (bits & 1) != 0) << v;
    EXPECT_EQ(has(c, "tp::cg::ld_issue"), (bits & 1) == 0) << v;
    EXPECT_EQ(has(c, "tp::cg::st_vec_lanes"), (bits & 2) != 0) << v;
    EXPECT_EQ(has(c, "tp::cg::st_vec"), (bits & 2) == 0) << v;
  }
  EXPECT_THROW(add_one(32, 128, bf16, 4), UserError);
}

namespace {

/// A [16, cols] shared tile of `dt` filled from X, then copied out: whole (to Y) or as its
/// first 8 columns (to Z). `row_lanes`: the annotation's value, or -1 for none.
Kernel through_shared(int64_t cols, DType dt, int row_lanes = -1) {
  Dim M("M"), N("N");
  Tensor X("X", {M, N}, dt), Y("Y", {M, N}, dt), Z("Z", {M, N}, dt);
  return kernel("through_shared", {X, Y, Z}, grid(ceildiv(N, cols), ceildiv(M, 16)), threads(128),
                [&](Var bx, Var by) {
                  if (row_lanes >= 0) annotate("row_lanes", std::to_string(row_lanes));
                  Tile s = alloc_shared({16, cols}, dt);
                  copy(X.tile(by * 16, bx * cols), s);
                  copy(s, Y.tile(by * 16, bx * cols));
                  copy(s.region({0, 0}, {16, 8}), Z.tile({by * 16, bx * cols}, {16, 8}));
                });
}

} // namespace

// A whole 16-bit shared tile goes to global memory in the destination's aligned 16-byte blocks
// (one block gather a block, whatever the row's alignment); a region of the tile, a tile whose
// rows are not a multiple of 8 elements and a 32-bit tile stay element by element.
TEST(LowerCopy, WholeSharedTilesStoreInAlignedGlobalBlocks) {
  auto blocks = [](const Kernel& k) {
    return only(lowered_calls(k), "tp::cg::st_block_from_shared").size();
  };
  EXPECT_EQ(blocks(through_shared(64, bf16)), 1u);
  EXPECT_EQ(blocks(through_shared(64, f16)), 1u);
  EXPECT_EQ(blocks(through_shared(12, bf16)), 0u);
  EXPECT_EQ(blocks(through_shared(64, f32)), 0u);
}

// A whole fragment stored into its whole shared tile goes in runs (one tp::cg::sts_vec each, as
// the reverse copy uses lds_vec), and a tile staged that way leaves in aligned global blocks.
TEST(LowerCopy, FragmentRunsStoreIntoSharedTilesAtOnce) {
  Dim M("M"), N("N");
  Tensor X("X", {M, N}, bf16), Y("Y", {M, N}, bf16);
  Kernel k = kernel("staged", {X, Y}, grid(ceildiv(N, 128), ceildiv(M, 32)), threads(128),
                    [&](Var bx, Var by) {
                      Tile x = alloc_fragment({32, 128}, f32), s = alloc_shared({32, 128}, bf16);
                      copy(X.tile(by * 32, bx * 128), x);
                      parallel({32, 128}, [&](Var i, Var j) { x(i, j) = x(i, j) * 2.0; });
                      copy(x, s);
                      copy(s, Y.tile(by * 32, bx * 128));
                    });
  std::vector<std::string> calls = lowered_calls(k);
  EXPECT_EQ(only(calls, "tp::cg::sts_vec").size(), 1u);
  EXPECT_EQ(only(calls, "tp::cg::st_block_from_shared").size(), 1u);
}

// A 16-bit global -> shared copy without TMA (sm_80) moves 16-byte chunks: copy16 where the
// global run is aligned; where it is inside the tensor but not aligned (rows of odd length),
// copy16_unaligned (the aligned blocks that hold it, shifted) or, with row_lanes' loads bit and
// adjacent lanes taking adjacent chunks of a row (64 columns: 8 chunks a row, so 8 lanes load
// them together; not a tile one chunk wide), copy16_lanes; element by element only at the edge.
// A 32-bit tile keeps the element copy.
TEST(LowerCopy, UnalignedChunksIntoSharedTilesLoadAsAlignedBlocks) {
  auto chunk_calls = [](const Kernel& k) {
    return only(lowered_calls(k, "sm_80", true), "tp::cg::copy16");
  };
  EXPECT_EQ(chunk_calls(through_shared(64, bf16)),
            (std::vector<std::string>{"tp::cg::copy16", "tp::cg::copy16_unaligned"}));
  EXPECT_EQ(chunk_calls(through_shared(64, bf16, 1)),
            (std::vector<std::string>{"tp::cg::copy16", "tp::cg::copy16_lanes<8>"}));
  EXPECT_EQ(chunk_calls(through_shared(8, bf16, 3)),
            (std::vector<std::string>{"tp::cg::copy16", "tp::cg::copy16_unaligned"}));
  EXPECT_TRUE(only(lowered_calls(through_shared(64, f32), "sm_80"), "tp::cg::copy16").empty());
}

// From three chunks a thread (64 x 64 over 128 threads: four), every chunk's load issues before
// any chunk is stored into the tile (tp::cg::ld_issue, then st16_taken; with row_lanes' loads
// bit their _lanes forms, 8 lanes taking a row's chunks), as a fragment's runs do; one or two
// chunks a thread keep the one-call copies above.
TEST(LowerCopy, ThreadsWithSeveralChunksIssueEveryLoadBeforeStoringAny) {
  auto fill_kernel = [](int row_lanes) {
    Dim M("M"), N("N");
    Tensor X("X", {M, N}, bf16), Y("Y", {M, N}, bf16);
    return kernel("fill", {X, Y}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                  [&](Var bx, Var by) {
                    if (row_lanes >= 0) annotate("row_lanes", std::to_string(row_lanes));
                    Tile s = alloc_shared({64, 64}, bf16);
                    copy(X.tile(by * 64, bx * 64), s);
                    copy(s, Y.tile(by * 64, bx * 64));
                  });
  };
  auto fill_calls = [](const Kernel& k) {
    std::vector<std::string> fill;
    for (const std::string& c : lowered_calls(k, "sm_80"))
      if (c.rfind("tp::cg::ld_issue", 0) == 0 || c.rfind("tp::cg::st16_taken", 0) == 0 ||
          c.rfind("tp::cg::copy16", 0) == 0)
        fill.push_back(c);
    return fill;
  };
  EXPECT_EQ(fill_calls(fill_kernel(3)),
            (std::vector<std::string>{"tp::cg::ld_issue_lanes", "tp::cg::st16_taken_lanes"}));
  Kernel k = fill_kernel(-1);
  EXPECT_EQ(fill_calls(k), (std::vector<std::string>{"tp::cg::ld_issue", "tp::cg::st16_taken"}));
  // `show --stage lowered` says so, and how the tile leaves.
  std::vector<std::string> notes;
  tp::testing::lowered_body(k, passes::Target::parse("sm_80"), nullptr, &notes);
  auto said = [&](const std::string& part) {
    return std::any_of(notes.begin(), notes.end(),
                       [&](const std::string& n) { return n.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(
      said("in 16-byte chunks, 4 a thread, every chunk's load issued before any is stored"));
  EXPECT_TRUE(said("a chunk of an unaligned row loads the aligned blocks that hold it"));
  EXPECT_TRUE(said("-> global in the destination's aligned 16-byte blocks"));
}
