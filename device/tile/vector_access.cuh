// Vector accesses of generated code between registers and memory: global rows loaded and stored
// in the widest accesses their addresses allow (unaligned runs as whole aligned blocks), shared
// rows read 16 bytes at a time, and 16-byte runs of a warp's lanes stored as aligned blocks.
#pragma once

#include "arch/sm80/sync.cuh"
#include "defs.cuh"
#include "tile/convert.cuh"
#include "types.cuh"

#if TP_CUDA
namespace tp::cg {

/// Whether p is a multiple of `bytes` (a power of two): the address decides the access width,
/// as a tensor view may start at any element (a DLPack slice).
TP_DEVICE bool aligned_to(const void* p, unsigned long long bytes) {
  return (reinterpret_cast<unsigned long long>(p) & (bytes - 1)) == 0;
}

struct alignas(16) Vec16 {
  uint32_t w[4];
};
/// 16 bytes from global to shared memory (both 16-byte aligned).
TP_DEVICE void copy16(void* smem_dst, const void* gsrc) {
  *reinterpret_cast<Vec16*>(smem_dst) = *reinterpret_cast<const Vec16*>(gsrc);
}

struct alignas(8) Vec8 {
  uint32_t w[2];
};
/// B bytes from global memory at g into the 16-byte aligned t: in 16-, 8- or 4-byte accesses,
/// the widest that g's address allows; 16-bit elements 2 bytes off a 4-byte boundary as a first
/// and a last element around 4-byte pairs; else in E-byte elements.
template <int B, int E>
TP_DEVICE void load_bytes(void* t, const void* g) {
  if constexpr (B % 16 == 0) {
    if (aligned_to(g, 16)) {
      for (int k = 0; k < B / 16; ++k)
        reinterpret_cast<Vec16*>(t)[k] = reinterpret_cast<const Vec16*>(g)[k];
      return;
    }
  }
  if constexpr (B % 8 == 0) {
    if (aligned_to(g, 8)) {
      for (int k = 0; k < B / 8; ++k)
        reinterpret_cast<Vec8*>(t)[k] = reinterpret_cast<const Vec8*>(g)[k];
      return;
    }
  }
  if constexpr (B % 4 == 0 && E <= 4) {
    if (aligned_to(g, 4)) {
      for (int k = 0; k < B / 4; ++k)
        reinterpret_cast<uint32_t*>(t)[k] = reinterpret_cast<const uint32_t*>(g)[k];
      return;
    }
  }
  if constexpr (E == 2 && B % 4 == 0 && B >= 8) {
    // 2 bytes off a 4-byte boundary (a row of odd length): the first and last elements alone,
    // the ones between in 4-byte pairs.
    const unsigned short* g16 = reinterpret_cast<const unsigned short*>(g);
    unsigned short* t16 = reinterpret_cast<unsigned short*>(t);
    t16[0] = g16[0];
    for (int k = 0; k < (B / 2 - 2) / 2; ++k) {
      const uint32_t w = *reinterpret_cast<const uint32_t*>(g16 + 1 + 2 * k);
      t16[1 + 2 * k] = static_cast<unsigned short>(w & 0xffffu);
      t16[2 + 2 * k] = static_cast<unsigned short>(w >> 16);
    }
    t16[B / 2 - 1] = g16[B / 2 - 1];
  } else if constexpr (E == 2) {
    for (int k = 0; k < B / 2; ++k)
      reinterpret_cast<unsigned short*>(t)[k] = reinterpret_cast<const unsigned short*>(g)[k];
  } else {
    for (int k = 0; k < B / 4; ++k)
      reinterpret_cast<uint32_t*>(t)[k] = reinterpret_cast<const uint32_t*>(g)[k];
  }
}
/// B bytes from the 16-byte aligned t to global memory at g, as load_bytes.
template <int B, int E>
TP_DEVICE void store_bytes(void* g, const void* t) {
  if constexpr (B % 16 == 0) {
    if (aligned_to(g, 16)) {
      for (int k = 0; k < B / 16; ++k)
        reinterpret_cast<Vec16*>(g)[k] = reinterpret_cast<const Vec16*>(t)[k];
      return;
    }
  }
  if constexpr (B % 8 == 0) {
    if (aligned_to(g, 8)) {
      for (int k = 0; k < B / 8; ++k)
        reinterpret_cast<Vec8*>(g)[k] = reinterpret_cast<const Vec8*>(t)[k];
      return;
    }
  }
  if constexpr (B % 4 == 0 && E <= 4) {
    if (aligned_to(g, 4)) {
      for (int k = 0; k < B / 4; ++k)
        reinterpret_cast<uint32_t*>(g)[k] = reinterpret_cast<const uint32_t*>(t)[k];
      return;
    }
  }
  if constexpr (E == 2 && B % 4 == 0 && B >= 8) {
    unsigned short* g16 = reinterpret_cast<unsigned short*>(g);
    const unsigned short* t16 = reinterpret_cast<const unsigned short*>(t);
    g16[0] = t16[0];
    for (int k = 0; k < (B / 2 - 2) / 2; ++k)
      *reinterpret_cast<uint32_t*>(g16 + 1 + 2 * k) =
          static_cast<uint32_t>(t16[1 + 2 * k]) | (static_cast<uint32_t>(t16[2 + 2 * k]) << 16);
    g16[B / 2 - 1] = t16[B / 2 - 1];
  } else if constexpr (E == 2) {
    for (int k = 0; k < B / 2; ++k)
      reinterpret_cast<unsigned short*>(g)[k] = reinterpret_cast<const unsigned short*>(t)[k];
  } else {
    for (int k = 0; k < B / 4; ++k)
      reinterpret_cast<uint32_t*>(g)[k] = reinterpret_cast<const uint32_t*>(t)[k];
  }
}
/// Word k + q of w, for a q in 0..3 known only at run time: selects, not an indexed (local
/// memory) access.
template <int W>
TP_DEVICE uint32_t word_at(const uint32_t (&w)[W], int k, unsigned q) {
  return q == 0 ? w[k] : q == 1 ? w[k + 1] : q == 2 ? w[k + 2] : w[k + 3];
}
/// Registers of the loaded type take the bytes as they are: a round trip through f32 would be
/// the load's first use, and a warp stalls at a use until its load returns.
template <int N, typename D, typename S>
TP_DEVICE void take_loaded(D* regs, const S* t) {
  for (int i = 0; i < N; ++i) {
    if constexpr (is_same<D, S>::value)
      regs[i] = t[i];
    else
      regs[i] = as<D>(f(t[i]));
  }
}
/// A fragment row load in two phases, so that all of a thread's loads of a copy are in flight
/// before any of them is used. ld_issue loads the bytes of N elements as they lie into `raw`;
/// ld_take moves them into registers, shifting an unaligned run into place and converting the
/// type. One combined call used each run's data (the shift, or the conversion to f32) right
/// after its load, so each run waited for the previous one's round trip to memory.
/// `raw` holds kRawWords<B> words (B = N * sizeof(S)): B / 4 + 4 words of data (an unaligned
/// 16-byte run spans B / 16 + 1 aligned blocks) and the run's offset in the first block (0: the
/// data lies in place). The codegen allocates it with the same formula (LowerCopy.cpp).
template <int B>
inline constexpr int kRawWords = B / 4 + 5;
/// Phase one: the loads. `slack`: the 16 bytes after the run are inside the tensor (ld_vec).
template <int N, typename S>
TP_DEVICE void ld_issue(int* raw, const S* g, bool slack) {
  constexpr int B = N * static_cast<int>(sizeof(S));
  uint32_t* w = reinterpret_cast<uint32_t*>(raw);
  if constexpr (B % 16 == 0) {
    const unsigned long long a = reinterpret_cast<unsigned long long>(g);
    const unsigned o = static_cast<unsigned>(a & 15ull);
    if (o == 0 || slack) {
      // Stepped back from g itself, not rebuilt from the integer: the compiler then still
      // knows the loads read the (restrict, read-only) global tensor and issues them as such.
      const Vec16* blocks = reinterpret_cast<const Vec16*>(reinterpret_cast<const char*>(g) - o);
      for (int k = 0; k < B / 16; ++k) {
        const Vec16 v = blocks[k];
        for (int i = 0; i < 4; ++i)
          w[4 * k + i] = v.w[i];
      }
      if (o != 0) { // the block that holds the run's tail
        const Vec16 v = blocks[B / 16];
        for (int i = 0; i < 4; ++i)
          w[B / 4 + i] = v.w[i];
      }
      raw[kRawWords<B> - 1] = static_cast<int>(o);
      return;
    }
  }
  alignas(16) unsigned char t[B];
  load_bytes<B, static_cast<int>(sizeof(S))>(t, g);
  for (int i = 0; i < B; ++i)
    reinterpret_cast<unsigned char*>(raw)[i] = t[i];
  raw[kRawWords<B> - 1] = 0;
}
/// Phase two: N registers from what ld_issue loaded (`g`, the same address, gives the type).
template <int N, typename D, typename S>
TP_DEVICE void ld_take(D* regs, const int* raw, const S*) {
  constexpr int B = N * static_cast<int>(sizeof(S));
  alignas(16) S t[N];
  const unsigned o = static_cast<unsigned>(raw[kRawWords<B> - 1]);
  if constexpr (B % 16 == 0) {
    uint32_t w[B / 4 + 4];
    for (int k = 0; k < B / 4 + 4; ++k)
      w[k] = static_cast<uint32_t>(raw[k]);
    uint32_t* out = reinterpret_cast<uint32_t*>(t);
    if (o == 0) {
      for (int k = 0; k < B / 4; ++k)
        out[k] = w[k];
    } else {
      const unsigned q = o >> 2, shift = (o & 3u) * 8u;
      for (int k = 0; k < B / 4; ++k)
        out[k] = __funnelshift_r(word_at(w, k, q), word_at(w, k + 1, q), shift);
    }
  } else {
    for (int i = 0; i < B; ++i)
      reinterpret_cast<unsigned char*>(t)[i] = reinterpret_cast<const unsigned char*>(raw)[i];
  }
  take_loaded<N>(regs, t);
}
/// N adjacent elements of a global row into N registers, converted to the registers' type: the
/// two phases back to back. The caller guarantees the N elements are inside the tensor; the
/// access width follows the address. `slack`: the 16 bytes after them are inside the tensor
/// too, so an unaligned run may be read as the whole aligned 16-byte blocks that hold it (two
/// vector loads for a 16-byte run where load_bytes would take up to five narrower ones). The
/// blocks reach up to 16 - o bytes before g and after the run (o = g mod 16): before g is always
/// safe (that block holds g, and allocations are 16-byte aligned); a block holding a byte of the
/// tensor never crosses a page, but a sanitizer counts every byte past the allocation's end.
template <int N, typename D, typename S>
TP_DEVICE void ld_vec(D* regs, const S* g, bool slack = false) {
  constexpr int kBytes = N * static_cast<int>(sizeof(S));
  int raw[kRawWords<kBytes>];
  ld_issue<N>(raw, g, slack);
  ld_take<N>(regs, raw, g);
}
/// N adjacent elements of a shared-memory row into N registers, converted to the registers'
/// type, in the widest accesses their size allows (16, 8 or 4 bytes): the caller guarantees the
/// run starts aligned to min(its size, 16 bytes) and, past 16 bytes, lies in one linear row.
/// Element by element, 16-bit elements eight apart in a warp's lanes hit the same bank 4 ways.
template <int N, typename D, typename S>
TP_DEVICE void lds_vec(D* regs, const S* s) {
  constexpr int B = N * static_cast<int>(sizeof(S));
  alignas(16) S t[N];
  if constexpr (B % 16 == 0) {
    for (int k = 0; k < B / 16; ++k)
      reinterpret_cast<Vec16*>(t)[k] = reinterpret_cast<const Vec16*>(s)[k];
  } else if constexpr (B % 8 == 0) {
    for (int k = 0; k < B / 8; ++k)
      reinterpret_cast<Vec8*>(t)[k] = reinterpret_cast<const Vec8*>(s)[k];
  } else if constexpr (B % 4 == 0) {
    for (int k = 0; k < B / 4; ++k)
      reinterpret_cast<uint32_t*>(t)[k] = reinterpret_cast<const uint32_t*>(s)[k];
  } else {
    for (int i = 0; i < N; ++i)
      t[i] = s[i];
  }
  take_loaded<N>(regs, t);
}
/// N registers into N adjacent elements of a global row, rounded to the tensor's type.
template <int N, typename D, typename S>
TP_DEVICE void st_vec(D* g, const S* regs) {
  alignas(16) D t[N];
  for (int i = 0; i < N; ++i)
    t[i] = as<D>(f(regs[i]));
  store_bytes<N* static_cast<int>(sizeof(D)), static_cast<int>(sizeof(D))>(g, t);
}

/// Bytes [s, e) of the 16-byte image w, stored at the same offsets of the aligned block b: in
/// at most three accesses of 2, 4 and 8 bytes, each aligned (s and e even, 0 <= s <= e <= 16,
/// and either s = 0 or e = 16: a prefix or a suffix of the block).
TP_DEVICE void store_block_part(char* b, const uint32_t (&w)[4], unsigned s, unsigned e) {
  auto word = [&](unsigned at) { return word_at(w, 0, at >> 2); };
  if ((s & 2) && s + 2 <= e) {
    *reinterpret_cast<unsigned short*>(b + s) =
        static_cast<unsigned short>(word(s) >> ((s & 2) * 8));
    s += 2;
  }
  if ((s & 4) && s + 4 <= e) {
    *reinterpret_cast<uint32_t*>(b + s) = word(s);
    s += 4;
  }
  if ((s & 8) && s + 8 <= e) {
    *reinterpret_cast<Vec8*>(b + s) = Vec8{{word(s), word(s + 4)}};
    s += 8;
  }
  // A prefix (s = 0): the widest pieces first.
  if (s + 8 <= e) {
    *reinterpret_cast<Vec8*>(b + s) = Vec8{{word(s), word(s + 4)}};
    s += 8;
  }
  if (s + 4 <= e) {
    *reinterpret_cast<uint32_t*>(b + s) = word(s);
    s += 4;
  }
  if (s + 2 <= e) *reinterpret_cast<unsigned short*>(b + s) = static_cast<unsigned short>(word(s));
}
/// The 16 bytes of c (8 words) from byte `start` (1..15): a window across two adjacent runs.
TP_DEVICE void byte_window(uint32_t (&out)[4], const uint32_t (&c)[8], unsigned start) {
  const unsigned q = start >> 2, shift = (start & 3u) * 8u;
  for (int k = 0; k < 4; ++k)
    out[k] = __funnelshift_r(word_at(c, k, q), word_at(c, k + 1, q), shift);
}
/// st_vec for 16-byte runs, reached by every lane of the warp (`active`: this lane's run is
/// whole and inside the tensor, and this lane writes it). A row that is not 16-byte aligned
/// would take up to five narrow stores a run, and the L2 requests they cost bound odd-width
/// element-wise kernels (ncu, H200, 2026-12-05: L2 at 93 %, DRAM at 51 %). Instead each lane
/// stores the aligned block that starts o bytes before its run (o = address mod 16), completed
/// with the last o bytes of the lane before, when that lane holds the run just before in
/// memory; a lane without such a neighbour stores its own part of the block narrowly, and a lane
/// whose successor takes no block stores its last o bytes itself. So a warp's contiguous
/// segment costs one aligned store per lane plus the two ends. When every active lane's run
/// is aligned, one vote and the plain store.
template <int N, typename D, typename S>
TP_DEVICE void st_vec_lanes(D* g, const S* regs, bool active) {
  static_assert(N * sizeof(D) == 16, "st_vec_lanes stores 16-byte runs");
  alignas(16) D t[N];
  for (int i = 0; i < N; ++i)
    t[i] = as<D>(f(regs[i]));
  const unsigned long long a = reinterpret_cast<unsigned long long>(g);
  const unsigned o = static_cast<unsigned>(a & 15ull);
  if (__all_sync(0xffffffffu, !active || o == 0)) {
    if (active) *reinterpret_cast<Vec16*>(g) = *reinterpret_cast<const Vec16*>(t);
    return;
  }
  const uint32_t* w = reinterpret_cast<const uint32_t*>(t);
  // Elements are at least 2 bytes, so bit 0 of an address is free to carry `active`.
  const unsigned long long before = __shfl_up_sync(0xffffffffu, a | (active ? 1ull : 0ull), 1);
  const unsigned lane = warp::lane_id();
  const bool joined = lane > 0 && (before & 1ull) && (before & ~1ull) + 16 == a;
  const bool next_joins = __shfl_down_sync(0xffffffffu, joined ? 1 : 0, 1) && lane < 31;
  uint32_t c[8];
  for (int k = 0; k < 4; ++k) {
    c[k] = __shfl_up_sync(0xffffffffu, w[k], 1);
    c[4 + k] = w[k];
  }
  if (!active) return;
  if (o == 0) {
    *reinterpret_cast<Vec16*>(g) = *reinterpret_cast<const Vec16*>(t);
    return;
  }
  char* block = reinterpret_cast<char*>(g) - o;
  uint32_t head[4];
  byte_window(head, c, 16 - o);
  if (joined)
    *reinterpret_cast<Vec16*>(block) = Vec16{{head[0], head[1], head[2], head[3]}};
  else
    store_block_part(block, head, o, 16);
  if (!next_joins) {
    uint32_t tail[4], own[8];
    for (int k = 0; k < 4; ++k)
      own[k] = own[4 + k] = w[k];
    byte_window(tail, own, 16 - o);
    store_block_part(block + 16, tail, 0, o);
  }
}

} // namespace tp::cg
#endif
