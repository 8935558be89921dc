// Paired shared writes (PairSharedWrites.cpp): a parallel loop spread over the threads whose body
// computes 16-bit shared tile elements at the innermost variable's column runs two adjacent
// columns a thread and stores each pair at once. Checked on the lowered statements (paired
// stores, element stores into the tile, the loop's trip count) and on the note `show` prints,
// for the loop forms that pair and the ones that must not.
#include <gtest/gtest.h>

#include <tilepilot/tilepilot.h>

#include "LoweredBody.h"
#include "ir/IRVisitor.h"

using namespace tp;

namespace {

enum class Form {
  plain,
  reads_run,
  two_tiles,
  odd_extent,
  shifted_column,
  transposed,
  reads_itself,
  f32_tile
};

/// A [16, 64] shared tile computed in a parallel loop over the threads (63 columns of it for
/// odd_extent), copied out.
Kernel kernel_of(Form f) {
  const int64_t cols = 64, ext = f == Form::odd_extent ? 63 : 64;
  Dim M("M"), N("N");
  Tensor X("X", {M, N}, bf16), Y("Y", {M, N}, f == Form::f32_tile ? f32 : bf16);
  return kernel("pairs", {X, Y}, grid(ceildiv(N, cols), ceildiv(M, 16)), threads(128),
                [&](Var bx, Var by) {
                  Tile s = alloc_shared({16, cols}, f == Form::f32_tile ? f32 : bf16);
                  Tile t = alloc_shared({16, cols}, bf16), u = alloc_shared({16, cols}, bf16);
                  if (f == Form::reads_run) copy(X.tile(by * 16, bx * cols), u);
                  parallel({16, ext}, [&](Var i, Var j) {
                    Var x = let("x", cast(f32, X(by * 16 + i, bx * cols + j)));
                    switch (f) {
                    case Form::shifted_column:
                      s(i, (j + 1) % cols) = x;
                      break;
                    case Form::transposed:
                      s(j % 16, i + (j / 16) * 16) = x;
                      break;
                    case Form::reads_itself:
                      s(i, j) = x + s(i, 0);
                      break;
                    case Form::reads_run: {
                      Var y = let("y", cast(f32, u(i, j)));
                      s(i, j) = x + y;
                      break;
                    }
                    case Form::two_tiles:
                      s(i, j) = x * 2.0;
                      t(i, j) = x + 1.0;
                      break;
                    default:
                      s(i, j) = x * 2.0;
                    }
                  });
                  copy(s, Y.tile(by * 16, bx * cols));
                  if (f == Form::two_tiles) copy(t, Y.tile(by * 16, bx * cols));
                });
}

struct Lowered {
  int paired = 0, element = 0;
  std::vector<std::string> notes;
};

Lowered lower(Form f) {
  Lowered out;
  Kernel k = kernel_of(f);
  ir::for_each_stmt(
      tp::testing::lowered_body(k, passes::Target::parse("sm_90a"), nullptr, &out.notes),
      [&](const ir::Stmt& st) {
        if (const auto* e = ir::as<ir::Evaluate>(st))
          if (const auto* c = ir::as<ir::Intrinsic>(e->value))
            out.paired += c->name.rfind("tp::cg::store", 0) == 0 &&
                          c->name.find("_aligned") != std::string::npos;
        if (const auto* s = ir::as<ir::Store>(st))
          out.element += s->buffer->scope == ir::Scope::shared;
      });
  return out;
}

bool has(const std::vector<std::string>& notes, const std::string& part) {
  for (const std::string& n : notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

} // namespace

TEST(PairSharedWrites, ColumnsPairAndTheNoteSaysSo) {
  Lowered l = lower(Form::plain);
  EXPECT_EQ(l.paired, 1);
  EXPECT_EQ(l.element, 0);
  // 64 columns: runs of 8, one 16-byte store each.
  EXPECT_TRUE(has(l.notes, "8 adjacent columns a thread, one 16-byte store"))
      << ::testing::PrintToString(l.notes);
}

TEST(PairSharedWrites, EveryStoreOfTheBodyPairs) {
  Lowered l = lower(Form::two_tiles);
  EXPECT_EQ(l.paired, 2);
  EXPECT_EQ(l.element, 0);
}

TEST(PairSharedWrites, OddExtentKeepsElementStores) {
  Lowered l = lower(Form::odd_extent);
  EXPECT_EQ(l.paired, 0);
  EXPECT_GT(l.element, 0);
  EXPECT_TRUE(has(l.notes, "odd number of elements")) << ::testing::PrintToString(l.notes);
}

TEST(PairSharedWrites, ColumnMustBeTheInnermostVariable) {
  for (Form f : {Form::shifted_column, Form::transposed}) {
    Lowered l = lower(f);
    EXPECT_EQ(l.paired, 0);
    EXPECT_TRUE(has(l.notes, "not paired")) << ::testing::PrintToString(l.notes);
  }
}

TEST(PairSharedWrites, ATileReadAndWrittenIsNotPaired) {
  Lowered l = lower(Form::reads_itself);
  EXPECT_EQ(l.paired, 0);
  EXPECT_TRUE(has(l.notes, "which it writes")) << ::testing::PrintToString(l.notes);
}

TEST(PairSharedWrites, OnlySixteenBitTiles) {
  Lowered l = lower(Form::f32_tile);
  EXPECT_EQ(l.paired, 0);
  EXPECT_TRUE(has(l.notes, "not bf16 or f16")) << ::testing::PrintToString(l.notes);
}

// A let that reads the same column of another shared tile takes its run of 8 with one vector
// load (tp::cg::lds_vec) instead of 8 element loads.
TEST(PairSharedWrites, ReadsOfASharedTileRunAreOneVectorLoad) {
  Lowered l = lower(Form::reads_run);
  EXPECT_EQ(l.paired, 1);
  EXPECT_TRUE(has(l.notes, "1 shared read(s) as vector loads"))
      << ::testing::PrintToString(l.notes);
}
