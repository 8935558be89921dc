// Host tests of the block store's arithmetic (device/tile/block_pieces.cuh, the code
// st_block_from_shared and st_block_part_from_shared run on the device): the gather of a block
// from two shared chunks at every shift, and the stores of every part of a block (the blocks a
// tile row's ends cut), which must write exactly its elements.
#include <gtest/gtest.h>

#include <cstring>

#include "tile/block_pieces.cuh"

namespace {

/// Two chunks of eight 16-bit elements, 100 + i at element i, as eight words (element 2k in
/// word k's low half).
void two_chunks(uint32_t (&w)[8]) {
  for (int k = 0; k < 8; ++k)
    w[k] = static_cast<uint32_t>(100 + 2 * k) | (static_cast<uint32_t>(100 + 2 * k + 1) << 16);
}

} // namespace

TEST(BlockPieces, GatherTakesEightElementsFromTheShift) {
  uint32_t w[8];
  two_chunks(w);
  for (int shift = 0; shift < 8; ++shift) {
    uint32_t b[4];
    tp::gather_block(w, shift, b);
    uint16_t e[8];
    std::memcpy(e, b, sizeof e);
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(e[i], 100 + shift + i) << "shift " << shift << ", element " << i;
  }
}

TEST(BlockPieces, PartStoresWriteExactlyTheirElements) {
  uint32_t w[8];
  two_chunks(w);
  for (int shift = 0; shift < 8; ++shift) {
    uint32_t b[4];
    tp::gather_block(w, shift, b);
    for (int first = 0; first < 8; ++first)
      for (int count = 0; first + count <= 8; ++count) {
        // The block at elements [8, 16) of a 16-byte aligned row of sentinels.
        alignas(16) uint16_t row[24];
        for (uint16_t& x : row)
          x = 0xdead;
        tp::store_block_part(row + 8, b, first, count);
        for (int i = 0; i < 24; ++i) {
          const int e = i - 8;
          const bool in = e >= first && e < first + count;
          EXPECT_EQ(row[i], in ? 100 + shift + e : 0xdead)
              << "shift " << shift << ", elements [" << first << ", " << first + count
              << "), row element " << i;
        }
      }
  }
}
