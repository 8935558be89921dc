// ChooseSharedSwizzles on tiny kernels: a transpose through a shared tile gets the swizzle that
// makes its column reads conflict-free, with the wavefronts of its accesses at the ideal; a
// tile read along its rows stays linear; a TMA box and a gemm operand keep the hardware's
// swizzle. The wavefront count itself is checked on hand-built accesses, and every swizzle
// period is checked to be a bijection that keeps 16-byte units whole.
#include <gtest/gtest.h>

#include <set>

#include "ir/IRVisitor.h"
#include "passes/ChooseSharedSwizzles.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"
#include "tilepilot/lang.h"

using namespace tp;
using passes::SharedLayout;
using passes::WarpAccess;

namespace {

struct Chosen {
  passes::LayoutInfo layouts;
  ir::Buffer tile; // the kernel's first shared tile
};

Chosen choose(const Kernel& k) {
  passes::Target t = passes::Target::parse("sm_90a");
  Chosen c;
  c.layouts = passes::infer_layouts(k.node(), t);
  passes::PipelinePlan p = passes::plan_pipeline(k.node(), c.layouts, t);
  passes::choose_shared_swizzles(k.node(), p, c.layouts);
  ir::for_each_stmt(k.node().body, [&](const ir::Stmt& s) {
    if (const auto* a = ir::as<ir::Allocate>(s);
        a && !c.tile && a->buffer->scope == ir::Scope::shared)
      c.tile = a->buffer;
  });
  return c;
}

/// Lesson 3's transpose: rows of A into a b x b tile in 16-byte runs, read down its columns
/// into a blocked fragment.
Kernel transpose(int64_t b, int threads_, DType dt = bf16, bool linear = false) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, dt), B("B", {N, M}, dt);
  return kernel("transpose", {A, B}, grid(ceildiv(N, b), ceildiv(M, b)), threads(threads_),
                [&](Var bx, Var by) {
                  if (linear) annotate("shared_swizzle", "0");
                  Tile s = alloc_shared({b, b}, dt), t = alloc_fragment({b, b}, dt);
                  copy(A.tile(by * b, bx * b), s);
                  parallel({b, b}, [&](Var i, Var j) { t(i, j) = s(j, i); });
                  copy(t, B.tile(bx * b, by * b));
                });
}

/// The same tile read along its rows, by a whole-tile copy into the fragment (16-byte runs) or
/// element by element in the loop (2-byte reads, 16 bytes apart per lane).
Kernel row_copy(int64_t b, bool vector_read) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {M, N}, bf16);
  return kernel("rows", {A, B}, grid(ceildiv(N, b), ceildiv(M, b)), threads(128),
                [&](Var bx, Var by) {
                  Tile s = alloc_shared({b, b}, bf16), t = alloc_fragment({b, b}, bf16);
                  copy(A.tile(by * b, bx * b), s);
                  if (vector_read) {
                    copy(s, t);
                    parallel({b, b}, [&](Var i, Var j) { t(i, j) = t(i, j) * 2.0f; });
                  } else {
                    parallel({b, b}, [&](Var i, Var j) { t(i, j) = s(i, j) * 2.0f; });
                  }
                  copy(t, B.tile(by * b, bx * b));
                });
}

// 32 x 32 bf16 over 128 threads: warp 0 writes 4 rows of 4 units a quarter warp (4
// wavefronts) and reads rows j, j+8, j+16, j+24 of one unit column 8 times. Linear, those four
// rows share their banks (4 wavefronts a read: 4 + 32 = 36); XOR by row / 8 spreads them over
// the four units (4 + 8 = 12, one wavefront per phase).
TEST(ChooseSharedSwizzles, TransposedReadsOfA32x32TileBecomeConflictFree) {
  Kernel k = transpose(32, 128);
  Chosen c = choose(k);
  const SharedLayout& sl = c.layouts.shared_layout(c.tile);
  ASSERT_EQ(sl.kind, SharedLayout::Kind::swizzled) << sl.str();
  EXPECT_EQ(sl.swizzle_bytes, 64);
  EXPECT_EQ(sl.period, 8);
  EXPECT_FALSE(sl.hardware_swizzle());
  auto acc = passes::warp_accesses(k.node(), c.layouts, c.tile);
  EXPECT_EQ(passes::wavefronts(acc, sl), 12);
  EXPECT_EQ(passes::wavefronts(acc, SharedLayout::linear(32, 32, 2)), 36);
  const std::string& note = c.layouts.shared_note.at(c.tile->uid);
  EXPECT_NE(note.find("12 shared wavefronts"), std::string::npos) << note;
  EXPECT_EQ(note.find("without bank conflicts"), std::string::npos) << note;
}

// 64 x 64 (128-byte rows): the read touches 8 rows 8 apart, 8-way conflicts when linear; the
// 128-byte swizzle by row / 8 serves every access in its phases' minimum.
TEST(ChooseSharedSwizzles, TransposedReadsOfA64x64TileReachTheIdealWavefronts) {
  Kernel k = transpose(64, 128);
  Chosen c = choose(k);
  const SharedLayout& sl = c.layouts.shared_layout(c.tile);
  ASSERT_EQ(sl.kind, SharedLayout::Kind::swizzled) << sl.str();
  EXPECT_EQ(sl.swizzle_bytes, 128);
  auto acc = passes::warp_accesses(k.node(), c.layouts, c.tile);
  const int64_t ideal = passes::conflict_free_wavefronts(acc);
  EXPECT_EQ(passes::wavefronts(acc, sl), ideal);
  EXPECT_GT(passes::wavefronts(acc, SharedLayout::linear(64, 64, 2)), 4 * ideal);
}

// f32 tiles copy element by element; the transposed read still gains.
TEST(ChooseSharedSwizzles, F32TransposeIsSwizzledToo) {
  Chosen c = choose(transpose(32, 256, f32));
  EXPECT_EQ(c.layouts.shared_layout(c.tile).kind, SharedLayout::Kind::swizzled)
      << c.layouts.shared_layout(c.tile).str();
}

// A 64 x 64 tile read down a column by 32 consecutive threads (a loop spread over the threads,
// shared to shared): 32 rows of one column have only 8 units to spread over, so 4-way conflicts
// remain after the best swizzle, and the note says how far from conflict-free it is.
TEST(ChooseSharedSwizzles, ConflictsNoSwizzleRemovesAreNoted) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {N, M}, bf16);
  Kernel k = kernel("staged", {A, B}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                    [&](Var bx, Var by) {
                      Tile s = alloc_shared({64, 64}, bf16), u = alloc_shared({64, 64}, bf16);
                      copy(A.tile(by * 64, bx * 64), s);
                      parallel({64, 64}, [&](Var i, Var j) { u(i, j) = s(j, i); });
                      copy(u, B.tile(bx * 64, by * 64));
                    });
  Chosen c = choose(k);
  ASSERT_EQ(c.layouts.shared_layout(c.tile).kind, SharedLayout::Kind::swizzled);
  auto acc = passes::warp_accesses(k.node(), c.layouts, c.tile);
  const int64_t got = passes::wavefronts(acc, c.layouts.shared_layout(c.tile));
  EXPECT_EQ(got, 4 * 32 + 16); // 32 reads at 4 wavefronts, 4 copies of 4 quarter warps
  EXPECT_EQ(passes::conflict_free_wavefronts(acc), 32 + 16);
  EXPECT_NE(c.layouts.shared_note.at(c.tile->uid).find("48 without bank conflicts"),
            std::string::npos)
      << c.layouts.shared_note.at(c.tile->uid);
}

// The kernel's annotation keeps its tiles as written, for side-by-side timing.
TEST(ChooseSharedSwizzles, AnnotationKeepsTheTilesLinear) {
  Chosen c = choose(transpose(32, 128, bf16, /*linear=*/true));
  EXPECT_EQ(c.layouts.shared_layout(c.tile).kind, SharedLayout::Kind::linear);
}

TEST(ChooseSharedSwizzles, RowReadsKeepTheLinearTile) {
  Chosen c = choose(row_copy(32, true));
  EXPECT_EQ(c.layouts.shared_layout(c.tile).kind, SharedLayout::Kind::linear);
  EXPECT_EQ(c.layouts.shared_note.count(c.tile->uid), 0u) << c.layouts.shared_note[c.tile->uid];
  // Element reads of a vec-8 layout: a warp's 32 two-byte reads lie in 8 rows, and the four
  // rows of one bank half share its 4 units whatever their order (4-way conflicts). The tile
  // stays row-major, and the note says what the reads cost: 8 x 4 + 4 against 8 + 4.
  Chosen e = choose(row_copy(32, false));
  EXPECT_EQ(e.layouts.shared_layout(e.tile).kind, SharedLayout::Kind::linear);
  EXPECT_NE(e.layouts.shared_note[e.tile->uid].find("row-major: 36 shared wavefronts of warp 0; "
                                                    "12 without bank conflicts"),
            std::string::npos)
      << e.layouts.shared_note[e.tile->uid];
}

// A pipelined gemm's operand tiles are loaded by TMA and read by wgmma: their layout is the
// hardware's, whatever else touches them. (A guard: they are swizzled before the pass runs, and
// it only replaces linear layouts; SimtGemmOperandsStayLinear tests the exclusion itself.)
TEST(ChooseSharedSwizzles, GemmOperandsKeepTheHardwareSwizzle) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, bf16);
  Kernel k = kernel("g", {A, B, C}, grid(ceildiv(N, 128), ceildiv(M, 128)), threads(128),
                    [&](Var bx, Var by) {
                      Tile a = alloc_shared({128, 64}, bf16), b = alloc_shared({64, 128}, bf16);
                      Tile acc = alloc_fragment({128, 128}, f32);
                      clear(acc);
                      pipelined(ceildiv(K, 64), 3, [&](Var ko) {
                        copy(A.tile(by * 128, ko * 64), a);
                        copy(B.tile(ko * 64, bx * 128), b);
                        gemm(a, b, acc);
                      });
                      copy(acc, C.tile(by * 128, bx * 128));
                    });
  Chosen c = choose(k);
  ir::for_each_stmt(k.node().body, [&](const ir::Stmt& s) {
    if (const auto* a = ir::as<ir::Allocate>(s); a && a->buffer->scope == ir::Scope::shared)
      EXPECT_TRUE(c.layouts.shared_layout(a->buffer).hardware_swizzle())
          << a->buffer->name << ": " << c.layouts.shared_layout(a->buffer).str();
  });
}

// A CUDA-core (simt) gemm's operands stay linear: the pass does not model the gemm's reads,
// so a transposed read of the same tile elsewhere must not swizzle it. (Tensor-core operands
// are swizzled before the pass runs; these are the operands the exclusion is for.)
TEST(ChooseSharedSwizzles, SimtGemmOperandsStayLinear) {
  Dim M("M"), N("N");
  Tensor A("A", {M, 32}, f32), B("B", {32, N}, f32), C("C", {M, N}, f32), D("D", {32, M}, f32);
  Kernel k = kernel("simt", {A, B, C, D}, grid(ceildiv(N, 32), ceildiv(M, 32)), threads(128),
                    [&](Var bx, Var by) {
                      Tile a = alloc_shared({32, 32}, f32), b = alloc_shared({32, 32}, f32);
                      Tile acc = alloc_fragment({32, 32}, f32), t = alloc_fragment({32, 32}, f32);
                      copy(A.tile(by * 32, 0), a);
                      copy(B.tile(0, bx * 32), b);
                      clear(acc);
                      gemm(a, b, acc);
                      copy(acc, C.tile(by * 32, bx * 32));
                      parallel({32, 32}, [&](Var i, Var j) { t(i, j) = a(j, i); });
                      copy(t, D.tile(0, by * 32));
                    });
  Chosen c = choose(k);
  bool simt = false;
  for (const auto& [g, kind] : c.layouts.gemms)
    simt = simt || kind == passes::GemmKind::simt;
  ASSERT_TRUE(simt) << "the gemm is not a simt gemm; the test needs linear operands";
  EXPECT_EQ(c.layouts.shared_layout(c.tile).kind, SharedLayout::Kind::linear)
      << c.layouts.shared_layout(c.tile).str();
}

// One column of a 32 x 32 f32 tile read by 32 lanes: every lane in bank 0, 32 wavefronts;
// a row: one. Sixteen-byte runs of one row: a quarter warp a wavefront.
TEST(ChooseSharedSwizzles, WavefrontsCountTheBusiestBankPerPhase) {
  SharedLayout lin = SharedLayout::linear(32, 32, 4);
  WarpAccess col{{}, 4}, row{{}, 4}, runs{{}, 16};
  for (int l = 0; l < 32; ++l) {
    col.lanes.push_back({l, 0});
    row.lanes.push_back({0, l});
    runs.lanes.push_back({l / 8, (l % 8) * 4});
  }
  EXPECT_EQ(passes::wavefronts({col}, lin), 32);
  EXPECT_EQ(passes::wavefronts({row}, lin), 1);
  EXPECT_EQ(passes::wavefronts({runs}, lin), 4);
  // Two lanes of one 4-byte word (16-bit elements) are one access of that word.
  WarpAccess pairs{{}, 2};
  for (int l = 0; l < 32; ++l)
    pairs.lanes.push_back({0, l});
  EXPECT_EQ(passes::wavefronts({pairs}, SharedLayout::linear(4, 64, 2)), 1);
}

// Every period maps the tile onto itself one to one and keeps each 16-byte unit contiguous
// and aligned, so vector copies stay whole.
TEST(ChooseSharedSwizzles, EverySwizzlePeriodIsABijectionOfWholeUnits) {
  for (auto [rows, cols, eb] :
       {std::tuple{32, 32, 2}, {64, 64, 2}, {16, 128, 2}, {32, 32, 4}, {8, 16, 2}, {128, 64, 4}})
    for (int64_t period = 1; period <= rows; period *= 2) {
      SharedLayout sl = SharedLayout::swizzled(rows, cols, eb, period);
      std::set<int64_t> seen;
      const int unit = 16 / eb;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          int64_t o = sl.offset(r, c);
          ASSERT_TRUE(o >= 0 && o < rows * cols) << sl.str();
          seen.insert(o);
          if (c % unit)
            EXPECT_EQ(o, sl.offset(r, c - 1) + 1) << sl.str() << " " << r << "," << c;
          else
            EXPECT_EQ(o % unit, 0) << sl.str();
        }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), rows * cols) << sl.str();
    }
}

} // namespace
