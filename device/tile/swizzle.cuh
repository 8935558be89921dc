// Shared-memory swizzle functions: byte offset -> swizzled byte offset, for the 32B, 64B and 128B
// modes that TMA writes (CU_TENSOR_MAP_SWIZZLE_*) and wgmma descriptors read (layout_type 3/2/1).
//
// A swizzle of width W bytes (W = 32, 64, 128) permutes the 16-byte chunks inside each W-byte
// row: chunk bits [4, 4+b) are XORed with bits [7, 7+b), b = log2(W / 16) (CuTe's Swizzle<b,4,3>).
// The pattern repeats every 8 rows of W bytes: the "atom" of 8*W bytes (1024 / 512 / 256), and it
// is applied to absolute shared-memory addresses, so a swizzled tile must start on an atom
// boundary (its descriptor's base_offset is then 0). Generated code that writes shared memory
// with ordinary stores, for TMA or wgmma to read, maps each element's byte offset through these.
#pragma once

#include "defs.cuh"

namespace tp {

/// 128-byte swizzle. @pre `off` is relative to a 1024-byte-aligned base.
/// @post off ^ result only has bits in [4, 7); bijective on each 1024-byte atom; involution;
/// each 16-byte chunk maps to one 16-byte chunk of the same 128-byte row.
TP_HOST_DEVICE constexpr uint32_t swizzle_128b(uint32_t off) {
  return off ^ ((off >> 3) & 0x70u);
}

/// 64-byte swizzle. @pre `off` is relative to a 512-byte-aligned base.
/// @post off ^ result only has bits in [4, 6); bijective on each 512-byte atom; involution.
TP_HOST_DEVICE constexpr uint32_t swizzle_64b(uint32_t off) {
  return off ^ ((off >> 3) & 0x30u);
}

/// 32-byte swizzle. @pre `off` is relative to a 256-byte-aligned base.
/// @post off ^ result only has bit 4; bijective on each 256-byte atom; involution.
TP_HOST_DEVICE constexpr uint32_t swizzle_32b(uint32_t off) {
  return off ^ ((off >> 3) & 0x10u);
}

/// Swizzle by width in bytes: 0 (none: identity), 32, 64 or 128.
TP_HOST_DEVICE constexpr uint32_t swizzle(int width_bytes, uint32_t off) {
  return width_bytes == 128  ? swizzle_128b(off)
         : width_bytes == 64 ? swizzle_64b(off)
         : width_bytes == 32 ? swizzle_32b(off)
                             : off;
}

/// Byte offset of (row, col_byte) in a tile stored as TMA writes it with swizzle width W and a box
/// whose inner extent is W bytes: the tile is a sequence of column slabs, each `rows` rows of W
/// bytes (slab j holds bytes [j*W, (j+1)*W) of every row), slab j at j * rows * W.
/// @pre width_bytes in {32, 64, 128}; rows % 8 == 0; the tile base is 8*W-byte aligned.
/// @post a bijection from [0, rows) x [0, slabs*W) onto [0, slabs*rows*W).
TP_HOST_DEVICE constexpr uint32_t slab_swizzled_offset(int row, int col_byte, int rows,
                                                       int width_bytes) {
  const uint32_t slab = static_cast<uint32_t>(col_byte / width_bytes);
  const uint32_t in_slab = static_cast<uint32_t>(row * width_bytes + col_byte % width_bytes);
  return slab * static_cast<uint32_t>(rows * width_bytes) + swizzle(width_bytes, in_slab);
}

} // namespace tp
