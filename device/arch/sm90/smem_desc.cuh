// wgmma shared-memory matrix descriptors: the 64-bit encoding, and the layout conventions
// (TMA box, LBO, SBO, stepping along K) TilePilot uses for 16-bit operands with 128B swizzle.
//
// Encoding (PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor Format"), enc(x) = (x & 0x3FFFF) >> 4:
//   bits [13:0]  enc(matrix start address)         (shared-window byte address)
//   bits [29:16] enc(leading dimension byte offset, LBO)
//   bits [45:32] enc(stride dimension byte offset, SBO)
//   bits [51:49] matrix base offset: 0 when the swizzle pattern starts on its repeat boundary
//                (1024 B for 128B, 512 B for 64B, 256 B for 32B), else (pattern start >> 7) & 7
//   bits [63:62] swizzle mode: 0 none, 1 = 128B, 2 = 64B, 3 = 32B
// LBO / SBO meaning (ISA 9.7.15.5.1.2.1, in units of 16-byte "elements"):
//   K-major:  LBO unused for swizzled layouts ("assumed 1": pass 16); SBO = offset between
//             consecutive groups of 8 rows (M or N direction).
//   MN-major: LBO = offset between consecutive (swizzle bytes / 16)-chunk groups along M/N, i.e.
//             between 64-element bf16 column slabs for 128B; SBO = offset between groups of 8
//             K-rows. Canonical 128B MN-major layout: ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)),
//             T = 8 bf16 per 16 bytes; K-major: ((8,m),(T,2k)):((8T,SBO),(1,T)).
//
// TilePilot conventions, bf16/f16 with 128B swizzle (tile bases 1024-byte aligned, base_offset 0):
//
// K-major operand (A as M x K, or B as N x K, K contiguous; trans bit 0):
//   TMA box = {64 (K, innermost: 128 B), R rows (M or N, multiple of 8)}, SWIZZLE_128B. In shared
//   memory row r occupies bytes [128r, 128r + 128), its 16-byte chunk c stored at chunk c ^ (r%8)
//   (swizzle_128b in tile/swizzle.cuh). A tile with BK > 64 is BK/64 such boxes ("slabs"), slab j
//   at j * R * 128 bytes. Descriptor for k16 step s (K columns [16s, 16s+16)):
//     start = slab(s / 4) + 32 * (s % 4) bytes,  LBO = 16 (ignored),  SBO = 1024 (8 rows x 128 B),
//     layout_type = 1.
//   Stepping along K inside a slab adds 32 bytes, i.e. +2 to the start-address field
//   (advance_smem_desc(desc, 32)): the hardware applies the swizzle XOR to the absolute address,
//   so the unswizzled start offset is what moves. One m64 A operand covers 64 rows (8 groups at
//   SBO); the next m64 block of A starts 64 * 128 = 8192 bytes later. A B operand of N columns
//   reads N rows of the slab.
//
// MN-major operand (A as K x M, or B as K x N, M/N contiguous; trans bit 1):
//   TMA box = {64 (M or N, innermost: 128 B), BK rows (K)}, SWIZZLE_128B. Slab j holds M/N
//   columns [64j, 64j + 64) of all BK K-rows, K-row k at bytes [128k, 128k + 128) of the slab;
//   slab j at j * BK * 128 bytes. Descriptor for k16 step s (K-rows [16s, 16s+16)):
//     start = slab 0 + 2048 * s bytes (16 rows x 128 B),  LBO = BK * 128 (slab to slab, used
//     when the operand spans more than 64 columns, e.g. N = 128),  SBO = 1024 (8 K-rows),
//     layout_type = 1.
//
// 64B / 32B swizzle follow the same pattern with 64 / 32-byte rows (32 / 16 bf16): K-major SBO =
// 8 * width; MN-major SBO = 8 * width, LBO = slab stride; swizzle atoms 512 / 256 bytes.
#pragma once

#include "defs.cuh"
#if TP_CUDA
#include "arch/sm80/smem.cuh"
#endif

namespace tp::sm90 {

/// Descriptor layout_type (bits 63:62) values.
enum : int { kDescSwizzleNone = 0, kDescSwizzle128B = 1, kDescSwizzle64B = 2, kDescSwizzle32B = 3 };

/// Swizzle width in bytes (0, 32, 64, 128) -> descriptor layout_type.
TP_HOST_DEVICE constexpr int desc_layout_type(int swizzle_bytes) {
  return swizzle_bytes == 128  ? kDescSwizzle128B
         : swizzle_bytes == 64 ? kDescSwizzle64B
         : swizzle_bytes == 32 ? kDescSwizzle32B
                               : kDescSwizzleNone;
}

/// matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4.
TP_HOST_DEVICE constexpr uint64_t desc_encode(uint32_t x) {
  return (x & 0x3FFFFu) >> 4;
}

/// The 64-bit descriptor from a 32-bit shared address and byte offsets (see the header comment).
/// @pre smem_addr, lbo and sbo are multiples of 16 and below 2^18; layout_type in 0..3.
TP_HOST_DEVICE constexpr uint64_t encode_smem_desc(uint32_t smem_addr, int layout_type, int lbo,
                                                   int sbo, int base_offset = 0) {
  return desc_encode(smem_addr) | desc_encode(static_cast<uint32_t>(lbo)) << 16 |
         desc_encode(static_cast<uint32_t>(sbo)) << 32 |
         static_cast<uint64_t>(base_offset & 7) << 49 |
         static_cast<uint64_t>(layout_type & 3) << 62;
}

/// The descriptor with its start address moved by `bytes` (a multiple of 16).
/// @pre the moved start address stays below 2^18 (no carry out of bits [13:0]).
TP_HOST_DEVICE constexpr uint64_t advance_smem_desc(uint64_t desc, int bytes) {
  return desc + static_cast<uint64_t>(bytes >> 4);
}

/// The K-major 128B-swizzle descriptor of the conventions above (LBO 16, unused; SBO 1024).
TP_HOST_DEVICE constexpr uint64_t kmajor_sw128_desc(uint32_t smem_addr) {
  return encode_smem_desc(smem_addr, kDescSwizzle128B, 16, 1024);
}

/// The MN-major 128B-swizzle descriptor of the conventions above: LBO = slab_bytes (BK * 128,
/// from one 64-element M/N slab to the next), SBO 1024.
TP_HOST_DEVICE constexpr uint64_t mnmajor_sw128_desc(uint32_t smem_addr, int slab_bytes) {
  return encode_smem_desc(smem_addr, kDescSwizzle128B, slab_bytes, 1024);
}

#if TP_CUDA
/// make_smem_desc(p, layout_type, LBO, SBO): descriptor of the operand starting at generic
/// pointer p (into shared memory); layout_type is kDescSwizzle*, offsets in bytes.
TP_DEVICE uint64_t make_smem_desc(const void* smem_ptr, int layout_type, int leading_byte_offset,
                                  int stride_byte_offset) {
  return encode_smem_desc(smem_u32(smem_ptr), layout_type, leading_byte_offset, stride_byte_offset);
}
#endif

} // namespace tp::sm90
