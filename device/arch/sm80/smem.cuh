// Shared-memory addressing: generic pointer -> 32-bit shared-window address, and 16-byte
// vector loads/stores through that address.
//
// Every wrapper in device/arch that takes a shared-memory operand takes this 32-bit address
// (what PTX's `.shared` state space uses), never a generic pointer.
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp {

/// cvta.to.shared.u32 of a generic pointer into shared memory (the NVVM builtin, so the compiler
/// can fold address arithmetic): the 32-bit address PTX .shared instructions take.
TP_DEVICE uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

} // namespace tp

namespace tp::sm80 {

/// st.shared.v4.b32 [addr], {a0, a1, a2, a3}: 16-byte store; addr must be 16-byte aligned.
TP_DEVICE void st_shared_v4(uint32_t addr, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a0), "r"(a1), "r"(a2),
               "r"(a3)
               : "memory");
}

/// ld.shared.v4.b32 {d0, d1, d2, d3}, [addr]: 16-byte load; addr must be 16-byte aligned.
TP_DEVICE void ld_shared_v4(uint32_t (&d)[4], uint32_t addr) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(addr)
               : "memory");
}

} // namespace tp::sm80
#endif
