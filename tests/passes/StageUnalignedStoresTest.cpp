// StageUnalignedStores on tiny kernels: which stores of element-wise fragments go through a
// shared tile, when the store is versioned on the destination's alignment, which stores are left
// direct and why, and that the lowered kernel then cuts the staged store at the destination's
// 16-byte blocks.
#include <gtest/gtest.h>

#include "BodyCensus.h"
#include "compile/Lower.h"
#include "ir/IRVisitor.h"
#include "passes/StageUnalignedStores.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using tp::testing::count_ifs;
using tp::testing::shared_tiles;

namespace {

struct Options {
  int64_t N = 0; // a constant row length (0: a Dim)
  int64_t bm = 16, bn = 256;
  int64_t col = 0;         // added to the tile's column offset
  bool pipelined = false;  // the store sits in a pipelined loop
  bool gemm = false;       // the kernel also runs a gemm
  bool reads_back = false; // the kernel reads C after storing it
  const char* ask = "1";   // annotate("staged_stores", ask); "" says nothing
  int64_t shared_rows = 0; // rows of a [rows, 256] bf16 shared tile the kernel also declares
  DType out = bf16;
};

// Tiles are named by allocation order: frag0 = a, frag1 = c.
/// C = 2 A over [bm, bn] tiles, A and C of M x N.
Kernel scale(const Options& o) {
  Dim M("M"), Nd("N");
  Expr N = o.N ? Expr(o.N) : Expr(Nd);
  Tensor A = o.N ? Tensor("A", {M, o.N}, bf16) : Tensor("A", {M, Nd}, bf16);
  Tensor C = o.N ? Tensor("C", {M, o.N}, o.out) : Tensor("C", {M, Nd}, o.out);
  return kernel(
      "scale", {A, C}, grid(ceildiv(N, o.bn), ceildiv(M, o.bm)), threads(128), [&](Var bx, Var by) {
        if (*o.ask) annotate("staged_stores", o.ask);
        Tile a = alloc_fragment({o.bm, o.bn}, bf16), c = alloc_fragment({o.bm, o.bn}, f32);
        if (o.shared_rows) {
          Tile s = alloc_shared({o.shared_rows, 256}, bf16);
          clear(s);
        }
        if (o.gemm) {
          Tile x = alloc_shared({64, 64}, bf16), y = alloc_shared({64, 64}, bf16);
          Tile acc = alloc_fragment({64, 64}, f32);
          clear(x), clear(y);
          gemm(x, y, acc, {.clear = true});
        }
        auto body = [&](Expr) {
          copy(A.tile(by * o.bm, bx * o.bn + o.col), a);
          parallel({o.bm, o.bn}, [&](Var i, Var j) { c(i, j) = cast(f32, a(i, j)) * 2.0; });
          copy(c, C.tile(by * o.bm, bx * o.bn + o.col));
          if (o.reads_back) copy(C.tile(by * o.bm, bx * o.bn + o.col), a);
        };
        if (o.pipelined)
          pipelined(2, 2, [&](Var k) { body(k); });
        else
          body(0);
      });
}

passes::StagedStores stage(const Kernel& k) {
  return passes::stage_unaligned_stores(k.node(), passes::Target::parse("sm_90a"));
}

} // namespace

// With N a Dim, alignment is known only at run time: the store is versioned, its staged
// version through a shared tile of the destination's dtype (the copy into it converts f32).
TEST(StageUnalignedStores, SymbolicRowsGiveTwoVersions) {
  passes::StagedStores p = stage(scale({}));
  ASSERT_EQ(p.stores.size(), 1u);
  const passes::StoreStaging& s = p.stores[0];
  EXPECT_TRUE(s.staged) << s.reason;
  EXPECT_TRUE(s.versioned);
  EXPECT_EQ(s.fragment, "frag1");
  EXPECT_EQ(s.tensor, "C");
  EXPECT_EQ(shared_tiles(p.body), (std::map<std::string, DType>{{"frag1_out", DType::bf16}}));
  EXPECT_EQ(count_ifs(p.body), 1);
  EXPECT_EQ(passes::to_string(s),
            "store of 'frag1' to 'C' staged through a shared tile, in the destination's aligned "
            "16-byte blocks, when its rows are not 16-byte aligned at run time (else direct)");
}

// Constant shapes decide at compile time: aligned rows store directly, rows of 8193 elements
// always go through the shared tile. A tile offset of bx * 256 + 3 is staged too, but versioned:
// the pass proves divisibility, not its absence.
TEST(StageUnalignedStores, ConstantShapesPickTheVersion) {
  passes::StagedStores aligned = stage(scale({.N = 8192}));
  EXPECT_FALSE(aligned.stores[0].staged);
  EXPECT_EQ(count_ifs(aligned.body), 0);
  EXPECT_TRUE(shared_tiles(aligned.body).empty());
  EXPECT_EQ(aligned.stores[0].reason,
            "the destination's rows and the tile's offset are 16-byte aligned");
  passes::StagedStores odd = stage(scale({.N = 8193}));
  EXPECT_TRUE(odd.stores[0].staged) << odd.stores[0].reason;
  EXPECT_FALSE(odd.stores[0].versioned);
  EXPECT_EQ(count_ifs(odd.body), 0);
  EXPECT_EQ(shared_tiles(odd.body).count("frag1_out"), 1u);
  passes::StagedStores off = stage(scale({.N = 8192, .col = 3}));
  EXPECT_TRUE(off.stores[0].staged) << off.stores[0].reason;
  EXPECT_TRUE(off.stores[0].versioned);
}

// What is left direct, and why.
TEST(StageUnalignedStores, StoresLeftDirectSayWhy) {
  auto reason = [](const Options& o) {
    passes::StagedStores p = stage(scale(o));
    EXPECT_EQ(p.stores.size(), 1u);
    EXPECT_FALSE(p.stores.empty() || p.stores[0].staged);
    EXPECT_EQ(shared_tiles(p.body).count("frag1_out"), 0u);
    return p.stores.empty() ? std::string() : p.stores[0].reason;
  };
  EXPECT_EQ(reason({.bm = 16, .bn = 32}), "its rows are not whole chunks of at least 64 elements");
  EXPECT_EQ(reason({.bm = 32}), "it holds more than 32 elements a thread");
  EXPECT_EQ(reason({.pipelined = true}), "it is inside a pipelined loop");
  EXPECT_EQ(reason({.gemm = true}), "the kernel has a gemm");
  EXPECT_EQ(reason({.reads_back = true}), "the kernel also reads 'C'");
  EXPECT_EQ(reason({.ask = "0"}), "the kernel asks for direct stores (staged_stores = 0)");
  // Off by default until the staged version has run on a GPU (StageUnalignedStores.h).
  static_assert(!passes::kStagedStoresByDefault, "this line then says what the default does");
  EXPECT_EQ(reason({.ask = ""}),
            "direct by default (annotate(\"staged_stores\", \"1\") asks for staging)");
  EXPECT_EQ(reason({.shared_rows = 96}),
            "a shared tile for it would take the kernel past 48 KiB of shared memory");
  // 32-bit outputs store their runs whole at any 4-byte alignment: never a candidate.
  passes::StagedStores f32_out = stage(scale({.out = f32}));
  EXPECT_TRUE(f32_out.stores.empty());
}

// Lowered, the staged version's store is the block store (LowerChunkCopies.cpp): `show` says
// so, and the plan notes the staging.
TEST(StageUnalignedStores, LoweredStoreIsCutAtTheDestinationsBlocks) {
  cuda::LoweredKernel lk = cuda::lower_kernel(scale({}), passes::Target::parse("sm_90a"));
  EXPECT_NE(lk.lowered_text.find("store of 'frag1' to 'C' staged through a shared tile"),
            std::string::npos);
  EXPECT_NE(lk.lowered_text.find("shared 'frag1_out' -> global in the destination's aligned "
                                 "16-byte blocks"),
            std::string::npos)
      << lk.lowered_text;
  EXPECT_EQ(lk.smem_bytes % (16 * 256 * 2), 0);
  EXPECT_GE(lk.smem_bytes, 16 * 256 * 2);
}
