// Host-side property tests of the device library's pure layout functions: swizzles, mma / wgmma
// fragment layouts, ldmatrix source addresses, and wgmma descriptors checked against a model of
// how the hardware reads the canonical layouts (PTX ISA 9.7.15.5.1.2) from TMA-written tiles.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "arch/sm80/mma_layout.cuh"
#include "arch/sm90/smem_desc.cuh"
#include "arch/sm90/wgmma_layout.cuh"
#include "tile/swizzle.cuh"

namespace {

using tp::Coord;

// Every swizzle mode permutes each of its atoms onto itself, only touches the chunk bits it
// names, keeps 16-byte chunks whole, and is its own inverse.
TEST(Swizzle, BijectionWithinEachAtomAndInvolution) {
  for (int width : {32, 64, 128}) {
    const uint32_t atom = 8u * static_cast<uint32_t>(width);
    const uint32_t chunk_mask = static_cast<uint32_t>(width / 16 - 1) << 4;
    for (uint32_t base = 0; base < 4 * atom; base += atom) {
      std::set<uint32_t> image;
      for (uint32_t off = base; off < base + atom; ++off) {
        const uint32_t s = tp::swizzle(width, off);
        ASSERT_EQ((s ^ off) & ~chunk_mask, 0u) << "width " << width << " off " << off;
        ASSERT_EQ(s / atom, off / atom) << "leaves its atom";
        ASSERT_EQ(s % 16, off % 16) << "splits a 16-byte chunk";
        ASSERT_EQ(s / static_cast<uint32_t>(width), off / static_cast<uint32_t>(width))
            << "leaves its row";
        ASSERT_EQ(tp::swizzle(width, s), off) << "not an involution";
        image.insert(s);
      }
      EXPECT_EQ(image.size(), atom) << "width " << width << " is not a bijection on an atom";
    }
  }
  EXPECT_EQ(tp::swizzle(0, 1234u), 1234u);
}

// 128B: row r's chunk c lands at chunk c ^ (r % 8) (what TMA SWIZZLE_128B does).
TEST(Swizzle, Swizzle128BMovesChunkCToCXorRow) {
  for (uint32_t r = 0; r < 16; ++r)
    for (uint32_t c = 0; c < 8; ++c)
      EXPECT_EQ(tp::swizzle_128b(r * 128 + c * 16), r * 128 + ((c ^ (r % 8)) * 16));
  EXPECT_EQ(tp::swizzle_64b(1 * 64 + 0), 1 * 64 + 0u);  // row 1 of a 64B atom: bit 7 = 0
  EXPECT_EQ(tp::swizzle_64b(2 * 64 + 0), 2 * 64 + 16u); // row 2: bit 7 set -> chunk ^ 1
  EXPECT_EQ(tp::swizzle_32b(4 * 32 + 16), 4 * 32u);     // row 4: bit 7 set -> chunk ^ 1
}

TEST(Swizzle, SlabOffsetIsABijectionOntoTheTile) {
  for (int width : {32, 64, 128}) {
    const int rows = 64, slabs = 3, bytes = rows * slabs * width;
    std::vector<int> hit(bytes, 0);
    for (int r = 0; r < rows; ++r)
      for (int cb = 0; cb < slabs * width; ++cb) {
        const uint32_t o = tp::slab_swizzled_offset(r, cb, rows, width);
        ASSERT_LT(o, static_cast<uint32_t>(bytes));
        ++hit[o];
      }
    for (int i = 0; i < bytes; ++i)
      ASSERT_EQ(hit[i], 1) << "width " << width << " byte " << i;
  }
}

// Checks that f maps [0, threads) x [0, values) one-to-one onto a rows x cols tile.
template <typename F>
void expect_bijection(int threads, int values, int rows, int cols, F f, const char* what) {
  std::vector<int> hit(rows * cols, 0);
  for (int t = 0; t < threads; ++t)
    for (int v = 0; v < values; ++v) {
      const Coord c = f(t, v);
      ASSERT_TRUE(c.row >= 0 && c.row < rows && c.col >= 0 && c.col < cols)
          << what << ": (" << t << ", " << v << ") -> (" << c.row << ", " << c.col << ")";
      ++hit[c.row * cols + c.col];
    }
  for (int i = 0; i < rows * cols; ++i)
    ASSERT_EQ(hit[i], 1) << what << ": element (" << i / cols << ", " << i % cols << ")";
}

TEST(MmaLayout, M16n8k16FragmentsAreBijections) {
  expect_bijection(32, 8, 16, 16, tp::sm80::mma16816_a, "mma A");
  expect_bijection(32, 4, 16, 8, tp::sm80::mma16816_b, "mma B");
  expect_bijection(32, 4, 16, 8, tp::sm80::mma16816_c, "mma C");
  // The ISA's worked cases: lane 5 (g=1, t=1) a0 = (1, 2), a7 = (9, 11); c3 of lane 31 = (15, 7).
  EXPECT_EQ(tp::sm80::mma16816_a(5, 0).row, 1);
  EXPECT_EQ(tp::sm80::mma16816_a(5, 0).col, 2);
  EXPECT_EQ(tp::sm80::mma16816_a(5, 7).row, 9);
  EXPECT_EQ(tp::sm80::mma16816_a(5, 7).col, 11);
  EXPECT_EQ(tp::sm80::mma16816_c(31, 3).row, 15);
  EXPECT_EQ(tp::sm80::mma16816_c(31, 3).col, 7);
}

// Models ldmatrix: lanes 8j..8j+7 address rows of matrix j; register j of lane l receives that
// matrix's row l/4, elements 2(l%4)+h (or, with .trans, column l/4, rows 2(l%4)+h). `src(lane)`
// is the (row, col) of the tile element at the start of the lane's 16-byte row.
Coord ldmatrix_element(Coord (*src)(int), bool trans, int lane, int reg, int h) {
  if (!trans) {
    const Coord row_start = src(8 * reg + lane / 4);
    return {row_start.row, row_start.col + 2 * (lane % 4) + h};
  }
  const Coord row_start = src(8 * reg + 2 * (lane % 4) + h);
  return {row_start.row, row_start.col + lane / 4};
}

TEST(MmaLayout, LdmatrixSourceAddressesYieldMmaFragments) {
  for (int lane = 0; lane < 32; ++lane)
    for (int reg = 0; reg < 4; ++reg)
      for (int h = 0; h < 2; ++h) {
        // A stored [m][k]: register reg holds elements 2*reg + h.
        const Coord a = ldmatrix_element(tp::sm80::ldmatrix_x4_a_src, false, lane, reg, h);
        const Coord want_a = tp::sm80::mma16816_a(lane, 2 * reg + h);
        EXPECT_EQ(a.row, want_a.row) << "A lane " << lane << " reg " << reg;
        EXPECT_EQ(a.col, want_a.col) << "A lane " << lane << " reg " << reg;
        // B for n-tiles 0 and 1: registers {0,1} tile 0, {2,3} tile 1 (n + 8).
        const Coord want_b = tp::sm80::mma16816_b(lane, 2 * (reg % 2) + h); // (k, n)
        const int want_n = want_b.col + 8 * (reg / 2), want_k = want_b.row;
        const Coord b = ldmatrix_element(tp::sm80::ldmatrix_x4_b_src, false, lane, reg, h);
        EXPECT_EQ(b.row, want_n) << "B [n][k] lane " << lane << " reg " << reg; // (n, k)
        EXPECT_EQ(b.col, want_k) << "B [n][k] lane " << lane << " reg " << reg;
        const Coord bt = ldmatrix_element(tp::sm80::ldmatrix_x4_trans_b_src, true, lane, reg, h);
        EXPECT_EQ(bt.row, want_k) << "B [k][n] lane " << lane << " reg " << reg; // (k, n)
        EXPECT_EQ(bt.col, want_n) << "B [k][n] lane " << lane << " reg " << reg;
      }
}

TEST(WgmmaLayout, AccumulatorMapsThreadsOneToOneOntoTheTile) {
  for (int n : {8, 16, 32, 64, 96, 128, 192, 256})
    expect_bijection(128, n / 2, 64, n, tp::sm90::wgmma_acc, "wgmma D");
  expect_bijection(128, 8, 64, 16, tp::sm90::wgmma_a, "wgmma A");
}

// Inside each warp's 16 rows, D is the mma.m16n8k16 accumulator repeated along N and A is the
// mma A fragment (the ISA figures for wgmma .m64nNk16 D and A).
TEST(WgmmaLayout, EachWarpHoldsTheMmaFragmentOfItsSixteenRows) {
  for (int t = 0; t < 128; ++t) {
    const int warp = t / 32, lane = t % 32;
    for (int r = 0; r < 128; ++r) {
      const Coord d = tp::sm90::wgmma_acc(t, r);
      const Coord c = tp::sm80::mma16816_c(lane, r % 4);
      EXPECT_EQ(d.row, 16 * warp + c.row);
      EXPECT_EQ(d.col, 8 * (r / 4) + c.col);
    }
    for (int i = 0; i < 8; ++i) {
      const Coord a = tp::sm90::wgmma_a(t, i);
      const Coord m = tp::sm80::mma16816_a(lane, i);
      EXPECT_EQ(a.row, 16 * warp + m.row);
      EXPECT_EQ(a.col, m.col);
    }
  }
}

// Reusing an accumulator as the RS A operand: the value feeding A element (q, h) at k-step kk
// sits in the same thread at the same (row, col).
TEST(WgmmaLayout, AccumulatorIndexForAOperandIsTheSameElement) {
  for (int t = 0; t < 128; ++t)
    for (int kk = 0; kk < 8; ++kk)
      for (int q = 0; q < 4; ++q)
        for (int h = 0; h < 2; ++h) {
          const Coord a = tp::sm90::wgmma_a(t, 2 * q + h);
          const Coord d = tp::sm90::wgmma_acc(t, tp::sm90::wgmma_acc_index_for_a(kk, q, h));
          EXPECT_EQ(d.row, a.row);
          EXPECT_EQ(d.col, 16 * kk + a.col);
        }
}

TEST(SmemDesc, EncodesTheFieldsOfThePtxIsaTable) {
  using namespace tp::sm90;
  const uint64_t d = encode_smem_desc(0x12340u, kDescSwizzle128B, 256, 1024, 5);
  EXPECT_EQ(d & 0x3fff, 0x1234u);     // start address >> 4, bits 13..0
  EXPECT_EQ((d >> 16) & 0x3fff, 16u); // LBO 256 B -> 16 (ISA example)
  EXPECT_EQ((d >> 32) & 0x3fff, 64u); // SBO 1024 B -> 64
  EXPECT_EQ((d >> 49) & 0x7, 5u);     // base offset
  EXPECT_EQ(d >> 62, 1u);             // 128B swizzle
  EXPECT_EQ(d & 0x3FFFC000C000C000ull & ~(0x7ull << 49), 0u) << "reserved bits set";
  EXPECT_EQ(encode_smem_desc(0x40000u + 0x100u, 0, 16, 16) & 0x3fff, 0x10u)
      << "addresses are taken modulo 2^18 (matrix-descriptor-encode)";
  EXPECT_EQ(advance_smem_desc(d, 32), d + 2);
  EXPECT_EQ(desc_layout_type(128), 1);
  EXPECT_EQ(desc_layout_type(64), 2);
  EXPECT_EQ(desc_layout_type(32), 3);
  EXPECT_EQ(desc_layout_type(0), 0);
  EXPECT_EQ(kmajor_sw128_desc(0x4000u), encode_smem_desc(0x4000u, kDescSwizzle128B, 16, 1024));
  EXPECT_EQ(mnmajor_sw128_desc(0x4000u, 8192),
            encode_smem_desc(0x4000u, kDescSwizzle128B, 8192, 1024));
}

// A model of how wgmma reads a 16-bit operand through a descriptor (ISA canonical layouts, T = 8
// elements per 16 bytes, swizzle applied to the absolute address). Returns the shared byte
// address of operand element (mn, k), k in [0, 16), relative to a 1024-aligned base.
uint32_t wgmma_read_address(uint64_t desc, bool mn_major, int mn, int k) {
  const uint32_t start = static_cast<uint32_t>(desc & 0x3fff) << 4;
  const uint32_t lbo = static_cast<uint32_t>((desc >> 16) & 0x3fff) << 4;
  const uint32_t sbo = static_cast<uint32_t>((desc >> 32) & 0x3fff) << 4;
  const int mode = static_cast<int>(desc >> 62);
  const int width = mode == 1 ? 128 : mode == 2 ? 64 : 32;
  uint32_t off;
  if (!mn_major) // ((8,m),(T,2k)):((W/16*T, SBO),(1,T)) elements
    off = (mn % 8) * width + (mn / 8) * sbo + k * 2;
  else // ((T, W/16, m),(8, k)):((1, T, LBO),(W/16*T, SBO)) elements
    off = (mn % (width / 2)) * 2 + (mn / (width / 2)) * lbo + (k % 8) * width + (k / 8) * sbo;
  return tp::swizzle(width, start + off);
}

// The conventions documented in smem_desc.cuh: for each k16 step, the descriptor built from
// (start, LBO, SBO) reads exactly the elements TMA put in shared memory (slabs of W-byte rows).
TEST(SmemDesc, DocumentedConventionsReadWhatTmaWrote) {
  for (int width : {128, 64, 32}) {
    const int elems = width / 2; // 16-bit elements per swizzled row (the TMA box inner extent)
    // K-major: operand rows R (M or N) x BK, slabs of `elems` K-columns, each R rows.
    {
      const int R = 128, BK = 2 * elems;
      for (int s = 0; s < BK / 16; ++s) {
        const int slab = (16 * s) / elems;
        const uint32_t start = slab * R * width + (16 * s % elems) * 2;
        const uint64_t desc =
            tp::sm90::encode_smem_desc(start, tp::sm90::desc_layout_type(width), 16, 8 * width);
        for (int mn = 0; mn < R; ++mn)
          for (int k = 0; k < 16; ++k) {
            const int kg = 16 * s + k;
            ASSERT_EQ(wgmma_read_address(desc, false, mn, k),
                      tp::slab_swizzled_offset(mn, kg * 2, R, width))
                << "K-major width " << width << " step " << s << " (" << mn << ", " << k << ")";
          }
      }
    }
    // MN-major: BK K-rows; slabs of `elems` MN-columns, each BK rows; operand spans 3 slabs.
    {
      const int BK = 64, MN = 3 * elems;
      for (int s = 0; s < BK / 16; ++s) {
        const uint32_t start = 16 * s * width;
        const uint64_t desc = tp::sm90::encode_smem_desc(start, tp::sm90::desc_layout_type(width),
                                                         BK * width, 8 * width);
        for (int mn = 0; mn < MN; ++mn)
          for (int k = 0; k < 16; ++k)
            ASSERT_EQ(wgmma_read_address(desc, true, mn, k),
                      tp::slab_swizzled_offset(16 * s + k, mn * 2, BK, width))
                << "MN-major width " << width << " step " << s << " (" << mn << ", " << k << ")";
      }
    }
  }
}

} // namespace
