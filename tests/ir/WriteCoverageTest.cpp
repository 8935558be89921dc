// writes_every_element: the proof that a statement list writes a whole tile, which rotation
// (passes/PlanRotation.h) relies on to keep one answer with two buffers. Every "true" below must
// hold for every run; every form the proof does not cover must answer false.
#include <gtest/gtest.h>

#include <tilepilot/tilepilot.h>

#include "ir/WriteCoverage.h"
#include "passes/FlattenLets.h"

using namespace tp;

namespace {

/// The top-level statements of a one-block kernel whose body is `body`, lets flattened as
/// lowering sees them, and the first shared tile it allocates.
struct Body {
  std::vector<ir::Stmt> stmts;
  ir::Buffer tile;
};

Body body_of(const std::function<void(Tensor&)>& body) {
  Dim K("K");
  Tensor W("W", {K, 256}, i32);
  Kernel k = kernel("k", {W}, grid(1), threads(128), [&](Var) { body(W); });
  ir::Stmt b = passes::flatten_lets(k.node().body);
  Body out;
  out.stmts = ir::as<ir::Seq>(b)->stmts;
  for (const ir::Stmt& s : out.stmts)
    if (const auto* a = ir::as<ir::Allocate>(s); a && !out.tile) out.tile = a->buffer;
  return out;
}

} // namespace

// Eight rows a word, each written at r * 8 + i: every row and column of the [64, 256] tile.
TEST(WriteCoverage, StridedRowsFromEveryOffsetCoverTheTile) {
  for (int offsets : {8, 7}) {
    Body b = body_of([&](Tensor& W) {
      Tile bs = alloc_shared({64, 256}, bf16);
      parallel({8, 256}, [&](Var r, Var j) {
        Var w = let("w", W(r, j));
        for (int i = 0; i < offsets; ++i)
          bs(r * 8 + i, j) = cast(f32, (w >> (4 * i)) & 15);
      });
    });
    // Seven offsets leave every eighth row unwritten.
    EXPECT_EQ(ir::writes_every_element(b.stmts, b.tile), offsets == 8) << offsets;
  }
}

TEST(WriteCoverage, AParallelLoopOverTheTileCoversItAndASmallerOneDoesNot) {
  for (int64_t rows : {64, 32}) {
    Body b = body_of([&](Tensor& W) {
      Tile bs = alloc_shared({64, 256}, f32);
      parallel({rows, 256}, [&](Var i, Var j) { bs(i, j) = cast(f32, W(i, j)); });
    });
    EXPECT_EQ(ir::writes_every_element(b.stmts, b.tile), rows == 64) << rows;
  }
}

// A store under a condition, or one that reads the same variable along both dimensions (the
// diagonal), proves nothing.
TEST(WriteCoverage, ConditionalAndDiagonalStoresProveNothing) {
  Body cond = body_of([](Tensor& W) {
    Tile bs = alloc_shared({64, 64}, f32);
    parallel({64, 64}, [&](Var i, Var j) { if_then(W(i, j) > 0, [&] { bs(i, j) = 1.0f; }); });
  });
  EXPECT_FALSE(ir::writes_every_element(cond.stmts, cond.tile));
  Body diag = body_of([](Tensor&) {
    Tile bs = alloc_shared({64, 64}, f32);
    parallel({64, 64}, [&](Var i, Var) { bs(i, i) = 1.0f; });
  });
  EXPECT_FALSE(ir::writes_every_element(diag.stmts, diag.tile));
}

// A fill or copy covers the tile when its region does; half a tile does not.
TEST(WriteCoverage, FillsAndCopiesCoverTheirRegion) {
  for (bool whole : {true, false}) {
    Body b = body_of([&](Tensor&) {
      Tile bs = alloc_shared({64, 64}, f32);
      if (whole)
        fill(bs, 0.0f);
      else
        fill(bs.region({0, 0}, {32, 64}), 0.0f);
    });
    EXPECT_EQ(ir::writes_every_element(b.stmts, b.tile), whole) << whole;
  }
}
