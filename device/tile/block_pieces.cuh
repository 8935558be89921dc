// A 16-byte global block of eight 16-bit elements gathered from two shared chunks, and the
// stores of part of it: the arithmetic of the block store (passes/LowerChunkCopies.cpp), whole
// blocks and the blocks a tile row's ends cut. Pure functions over words and a pointer, valid host
// C++, so that tests/device/BlockPiecesTest.cpp runs them on the host at every shift and cut.
#pragma once

#include "defs.cuh"

namespace tp {

/// The low 32 bits of hi:lo shifted right by `bits` (0..31): __funnelshift_r on the device.
TP_HOST_DEVICE uint32_t funnel_r(uint32_t lo, uint32_t hi, unsigned bits) {
#if TP_DEVICE_PASS
  return __funnelshift_r(lo, hi, bits);
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> (bits & 31u));
#endif
}

/// Word k + q of w, for a q in 0..3 known only at run time: selects, not an indexed (local
/// memory) access.
template <int W>
TP_HOST_DEVICE uint32_t word_at(const uint32_t (&w)[W], int k, unsigned q) {
  return q == 0 ? w[k] : q == 1 ? w[k + 1] : q == 2 ? w[k + 2] : w[k + 3];
}

/// The eight 16-bit elements that start `shift` (0..7) elements into w, two chunks of four
/// words each, as four words.
TP_HOST_DEVICE void gather_block(const uint32_t (&w)[8], int shift, uint32_t (&out)[4]) {
  const unsigned q = static_cast<unsigned>(shift) >> 1, bits = (shift & 1) * 16u;
  for (int k = 0; k < 4; ++k)
    out[k] = funnel_r(word_at(w, k, q), word_at(w, k + 1, q), bits);
}

struct alignas(8) Words2 {
  uint32_t x, y;
};

/// Elements [first, first + count) of the block `b` (four words) stored at g, a 16-byte aligned
/// block of 16-bit elements, in the fewest naturally aligned stores: up to an alignment of four
/// elements, then down again for the tail, at most four stores (1, 2, 4 and 1 elements, say).
/// Element by element, such a block took up to eight stores.
TP_HOST_DEVICE void store_block_part(uint16_t* g, const uint32_t (&b)[4], int first, int count) {
  // Word i of the block, i known only at run time.
  auto word = [&](int i) { return i == 0 ? b[0] : i == 1 ? b[1] : i == 2 ? b[2] : b[3]; };
  auto st1 = [&](int e) { g[e] = static_cast<uint16_t>(word(e >> 1) >> ((e & 1) * 16)); };
  auto st2 = [&](int e) { reinterpret_cast<uint32_t*>(g)[e >> 1] = word(e >> 1); };
  auto st4 = [&](int e) {
    reinterpret_cast<Words2*>(g)[e >> 2] = e == 0 ? Words2{b[0], b[1]} : Words2{b[2], b[3]};
  };
  int e = first;
  const int end = first + count;
  if ((e & 1) && e < end) st1(e++);
  if ((e & 2) && e + 2 <= end) st2(e), e += 2;
  if ((e & 4) && e + 4 <= end) st4(e), e += 4;
  if (e + 4 <= end) st4(e), e += 4;
  if (e + 4 <= end) st4(e), e += 4;
  if (e + 2 <= end) st2(e), e += 2;
  if (e < end) st1(e);
}

} // namespace tp
