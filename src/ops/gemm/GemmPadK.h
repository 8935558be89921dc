// K padding for GEMMs whose operand rows are not 16-byte aligned (K odd in bf16, say): a first
// kernel copies the operands into zero-padded intermediates whose K is a multiple of 16 bytes,
// then the TMA kernel runs on them. Without it such a launch takes the variant without TMA,
// whose chunks at 2-byte aligned addresses are plain loads that wait for each other: 0.40x
// cuBLASLt at 2048 x 2048 x 2047 on the H100 (device run r1, 2026-12-06). The zeros add
// nothing to any dot product, so C is the same sum in the same K order.
//
// Kernels and their parameters (outputs last):
//   pad:  A, B (as the layout gives them), Ap, Bp (K rounded up to 16 bytes)
//   then the config's own steps (the plain kernel, split-K's two, the GEMV) on Ap, Bp for A, B.
// Knob pad_k=1 asks for it (GemmOp::program); the sm_90a default sets it for the plain kernel,
// and in tn wherever only A is copied (decode included).
// Layouts: nt pads both operands' rows; nn pads A's rows and adds zero rows to B [K, N] (its
// rows are N long, so N must already be aligned). tn's rows are M and N long, so K needs no
// padding there; where M leaves A [K, M]'s rows unaligned (decode's M = 7, say: no TMA for A,
// 0.24-0.33x cuBLASLt on the H100, device run r3 of 2026-12-06), the first kernel writes A
// transposed, [M, Kp], and the steps after it run as nn (B [K, N] gains zero rows only where
// Kp > K). A is M x K: at decode that copy is a few tens of KiB.
#pragma once
#include <string>
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops::padk {

/// The config's `pad_k`: 0 when absent.
bool pad_k_of(const Config& c);
/// Whether the first kernel makes every operand row of `p` 16-byte aligned where it was not:
/// K is not a multiple of 16 bytes, layout nt, or nn with N aligned; or layout tn with M not
/// a multiple of 16 bytes and N aligned.
bool pads(const Problem& p);
/// Whether config c runs the first kernel on p: it asks (pad_k=1) and p needs it.
bool aligns(const Problem& p, const Config& c);
/// The layout the steps after the first kernel run in: nn for tn's transposed A, else p's.
std::string steps_layout(const Problem& p);
/// Whether the first kernel writes a padded B too (always but in tn with K aligned).
bool pads_b(const Problem& p);
/// K rounded up to 16 bytes of `p`'s dtype.
int64_t padded_k(const Problem& p);
/// Kernel 1: A, B -> Ap, Bp with zeros past K (A, B, Ap, Bp), or without B's pair where
/// pad_b is false (A, Ap). Ap is [M, Kp] in every layout.
Kernel build_pad(DType dtype, const std::string& layout, bool pad_b);
/// Ap, and Bp where pads_b (the program's last intermediates).
std::vector<ArgSpec> pad_intermediates(const Problem& p);

} // namespace tp::ops::padk
