// Global row runs moved by the lanes of a segment together. A blocked fragment's adjacent lanes
// hold adjacent 16-byte runs of one global row (a run of lane i starts 16 bytes after lane
// i - 1's). When the row is not 16-byte aligned (a row of odd length), each run straddles two
// aligned 16-byte blocks, and block i + 1 holds the tail of run i and the head of run i + 1. So:
// - a load reads one aligned block a lane (its run's first) and takes the next block from the
//   next lane by shuffles;
// - a store writes one aligned block a lane: the previous lane's tail and its own head.
// Only a segment's ends (and lanes beside a run outside the tensor) take narrower accesses.
// Alone, each lane read its run as the two blocks that hold it and wrote it in up to five
// narrower stores, so a warp touched every sector several times: ncu found the odd-row
// element-wise kernel bound by L2 requests at half the DRAM bandwidth (2026-12-05).
//
// Every lane of a segment calls these, whether or not its own run is inside the tensor
// (`full`); a lane outside moves its in-bounds elements itself, after. Lanes exchange data only
// with neighbours that are executing the same call (activemask), so a fragment copy under a
// condition that splits a segment stays correct.
#pragma once

#include "arch/sm80/sync.cuh"
#include "defs.cuh"
#include "tile/codegen.cuh"
#include "types.cuh"

#if TP_CUDA
namespace tp::cg {
namespace row_lanes {

/// Word i (0..3, known only at run time) of w, by selects rather than an indexed (local
/// memory) access.
TP_DEVICE uint32_t word(const uint32_t (&w)[4], unsigned i) {
  return i == 0 ? w[0] : i == 1 ? w[1] : i == 2 ? w[2] : w[3];
}

/// The 16 bytes that start `start` bytes (1..15) into lo ++ hi.
TP_DEVICE void bytes_at(uint32_t (&out)[4], const uint32_t (&lo)[4], const uint32_t (&hi)[4],
                        unsigned start) {
  const uint32_t c[8] = {lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]};
  const unsigned q = start >> 2, shift = (start & 3u) * 8u;
  for (int k = 0; k < 4; ++k)
    out[k] = __funnelshift_r(word_at(c, k, q), word_at(c, k + 1, q), shift);
}

/// Bytes [a, hi) of the aligned 16-byte block at `blk`, whose image is w; a and hi even. The
/// widest aligned stores that fit: at most three (2, 4 and 8 bytes).
TP_DEVICE void store_range(unsigned char* blk, const uint32_t (&w)[4], unsigned a, unsigned hi) {
  auto half_at = [&](unsigned b) {
    return static_cast<unsigned short>(word(w, b >> 2) >> ((b & 2u) * 8u));
  };
  if ((a & 2u) && a + 2 <= hi) {
    *reinterpret_cast<unsigned short*>(blk + a) = half_at(a);
    a += 2;
  }
  if ((a & 4u) && a + 4 <= hi) {
    *reinterpret_cast<uint32_t*>(blk + a) = word(w, a >> 2);
    a += 4;
  }
  if (a + 8 <= hi) { // a is 0 or 8 here
    *reinterpret_cast<Vec8*>(blk + a) = Vec8{{word(w, a >> 2), word(w, (a >> 2) + 1)}};
    a += 8;
  }
  if (a + 4 <= hi) {
    *reinterpret_cast<uint32_t*>(blk + a) = word(w, a >> 2);
    a += 4;
  }
  if (a + 2 <= hi) *reinterpret_cast<unsigned short*>(blk + a) = half_at(a);
}

/// Bytes [0, hi) of the aligned 16-byte block at `blk` into w (the rest zero); hi even. The
/// widest aligned loads that fit: at most three (8, 4 and 2 bytes).
TP_DEVICE void load_range(uint32_t (&w)[4], const unsigned char* blk, unsigned hi) {
  for (int i = 0; i < 4; ++i)
    w[i] = 0;
  unsigned a = 0;
  if (hi >= 8) {
    const Vec8 v = *reinterpret_cast<const Vec8*>(blk);
    w[0] = v.w[0];
    w[1] = v.w[1];
    a = 8;
  }
  if (a + 4 <= hi) {
    const uint32_t x = *reinterpret_cast<const uint32_t*>(blk + a);
    if (a == 0)
      w[0] = x;
    else
      w[2] = x;
    a += 4;
  }
  if (a + 2 <= hi) {
    const uint32_t x = *reinterpret_cast<const unsigned short*>(blk + a);
    const unsigned i = a >> 2; // a is 0, 4, 8 or 12: the low half of word i
    if (i == 0)
      w[0] = x;
    else if (i == 1)
      w[1] = x;
    else if (i == 2)
      w[2] = x;
    else
      w[3] = x;
  }
}

/// Whether lane `lane + 1` is in this lane's L-lane segment and among `mask`.
template <int L>
TP_DEVICE bool next_here(unsigned lane, uint32_t mask) {
  return (lane % L) + 1 < L && ((mask >> (lane + 1)) & 1u);
}
template <int L>
TP_DEVICE bool prev_here(unsigned lane, uint32_t mask) {
  return lane % L != 0 && ((mask >> (lane - 1)) & 1u);
}

} // namespace row_lanes

/// ld_issue for a run whose L-lane segment calls together (see above). An unaligned run loads
/// the aligned block it starts in, which the previous lane takes as its second. Its own second
/// block comes from the next lane in ld_take_lanes when that lane's run is inside the tensor;
/// else it is loaded here, whole when the 16 bytes after the run are inside the tensor
/// (`slack`), else as just the run's bytes in it. raw's last word holds the run's offset, plus
/// 256 when the next lane supplies the second block.
template <int N, int L, typename S>
TP_DEVICE void ld_issue_lanes(int* raw, const S* g, bool slack, bool full) {
  static_assert(N * sizeof(S) == 16, "16-byte runs");
  constexpr int kLast = kRawWords<16> - 1;
  const unsigned o = static_cast<unsigned>(reinterpret_cast<unsigned long long>(g) & 15ull);
  if (o == 0) {
    if (full) ld_issue<N>(raw, g, slack);
    return;
  }
  // The whole segment is here: its runs share a row, so they share o.
  const uint32_t mask = warp::active_mask();
  const unsigned lane = warp::lane_id();
  const bool from_next =
      warp::shfl_down1(full ? 1u : 0u, L, mask) != 0 && row_lanes::next_here<L>(lane, mask);
  if (!full) return;
  // Stepped back from g itself: the loads still read the (restrict, read-only) tensor.
  const Vec16* blocks = reinterpret_cast<const Vec16*>(reinterpret_cast<const char*>(g) - o);
  const Vec16 v = blocks[0];
  for (int i = 0; i < 4; ++i)
    raw[i] = static_cast<int>(v.w[i]);
  if (slack && !from_next) {
    const Vec16 t = blocks[1];
    for (int i = 0; i < 4; ++i)
      raw[4 + i] = static_cast<int>(t.w[i]);
  } else if (!from_next) {
    uint32_t t[4];
    row_lanes::load_range(t, reinterpret_cast<const unsigned char*>(blocks + 1), o);
    for (int i = 0; i < 4; ++i)
      raw[4 + i] = static_cast<int>(t[i]);
  }
  raw[kLast] = static_cast<int>(o + (from_next ? 256u : 0u));
}

/// ld_take for a run loaded by ld_issue_lanes: the next lane's first block by shuffles when it
/// supplies this run's second (loaded here instead should that lane not be at this call).
template <int N, int L, typename D, typename S>
TP_DEVICE void ld_take_lanes(D* regs, int* raw, const S* g, bool full) {
  static_assert(N * sizeof(S) == 16, "16-byte runs");
  constexpr int kLast = kRawWords<16> - 1;
  const unsigned o = static_cast<unsigned>(reinterpret_cast<unsigned long long>(g) & 15ull);
  if (o == 0) {
    if (full) ld_take<N>(regs, raw, g);
    return;
  }
  const uint32_t mask = warp::active_mask();
  const unsigned lane = warp::lane_id();
  uint32_t next[4];
  for (int i = 0; i < 4; ++i)
    next[i] = warp::shfl_down1(static_cast<uint32_t>(raw[i]), L, mask);
  if (!full || (static_cast<unsigned>(raw[kLast]) & 256u) == 0) {
    if (full) ld_take<N>(regs, raw, g);
    return;
  }
  if (!row_lanes::next_here<L>(lane, mask)) { // not here now: its block is in the tensor
    const Vec16 t = *reinterpret_cast<const Vec16*>(reinterpret_cast<const char*>(g) - o + 16);
    for (int i = 0; i < 4; ++i)
      next[i] = t.w[i];
  }
  for (int i = 0; i < 4; ++i)
    raw[4 + i] = static_cast<int>(next[i]);
  raw[kLast] = static_cast<int>(o);
  ld_take<N>(regs, raw, g);
}

/// ld_vec for a segment that calls together: the two phases back to back.
template <int N, int L, typename D, typename S>
TP_DEVICE void ld_vec_lanes(D* regs, const S* g, bool slack, bool full) {
  int raw[kRawWords<16>];
  ld_issue_lanes<N, L>(raw, g, slack, full);
  ld_take_lanes<N, L>(regs, raw, g, full);
}

/// The second phase of a chunk loaded by ld_issue_lanes (st16_taken for a segment): stored
/// into shared memory when the chunk is whole inside the tensor (`whole`); the caller copies
/// the rest element by element.
template <int L, typename T>
TP_DEVICE void st16_taken_lanes(void* smem_dst, int* raw, const T* g, bool whole) {
  constexpr int N = 16 / static_cast<int>(sizeof(T));
  alignas(16) T t[N];
  ld_take_lanes<N, L>(t, raw, g, whole);
  if (whole) *reinterpret_cast<Vec16*>(smem_dst) = *reinterpret_cast<const Vec16*>(t);
}

/// A 16-byte chunk of a global row into shared memory where an L-lane segment's chunks are
/// adjacent in the row (copy16_unaligned's work for a segment): both phases back to back.
template <int L, typename T>
TP_DEVICE void copy16_lanes(void* smem_dst, const T* g, bool slack, bool whole) {
  int raw[kRawWords<16>];
  ld_issue_lanes<16 / static_cast<int>(sizeof(T)), L>(raw, g, slack, whole);
  st16_taken_lanes<L>(smem_dst, raw, g, whole);
}

/// st_vec for a run whose L-lane segment calls together. An unaligned run's lane stores the
/// aligned block that ends inside its run whole, with the previous lane's tail, when that lane's
/// run is inside the tensor; otherwise only its own part of it. The part of its run in the next
/// block is the next lane's to store, unless that lane's run is outside the tensor.
template <int N, int L, typename D, typename S>
TP_DEVICE void st_vec_lanes(D* g, const S* regs, bool full) {
  static_assert(N * sizeof(D) == 16, "16-byte runs");
  const unsigned o = static_cast<unsigned>(reinterpret_cast<unsigned long long>(g) & 15ull);
  if (o == 0) {
    if (full) st_vec<N>(g, regs);
    return;
  }
  alignas(16) D t[N];
  for (int i = 0; i < N; ++i)
    t[i] = as<D>(f(regs[i]));
  uint32_t mine[4], prev[4];
  for (int i = 0; i < 4; ++i)
    mine[i] = reinterpret_cast<const Vec16*>(t)->w[i];
  const uint32_t mask = warp::active_mask();
  const unsigned lane = warp::lane_id();
  for (int i = 0; i < 4; ++i)
    prev[i] = warp::shfl_up1(mine[i], L, mask);
  const uint32_t here = full ? 1u : 0u;
  const bool prev_full = warp::shfl_up1(here, L, mask) != 0 && row_lanes::prev_here<L>(lane, mask);
  const bool next_full =
      warp::shfl_down1(here, L, mask) != 0 && row_lanes::next_here<L>(lane, mask);
  if (!full) return;
  unsigned char* blk = reinterpret_cast<unsigned char*>(g) - o; // the block this run starts in
  uint32_t head[4], tail[4];
  row_lanes::bytes_at(head, prev, mine, 16 - o);
  if (prev_full)
    *reinterpret_cast<Vec16*>(blk) = Vec16{{head[0], head[1], head[2], head[3]}};
  else
    row_lanes::store_range(blk, head, o, 16);
  if (!next_full) {
    row_lanes::bytes_at(tail, mine, mine, 16 - o);
    row_lanes::store_range(blk + 16, tail, 0, o);
  }
}

} // namespace tp::cg
#endif
