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
// Knob pad_k=1 asks for it (GemmOp::program); the sm_90a default sets it for the plain kernel.
// Layouts: nt pads both operands' rows; nn pads A's rows and adds zero rows to B [K, N] (its
// rows are N long, so N must already be aligned). tn's rows are M and N long: nothing to pad.
#pragma once
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops::padk {

/// The config's `pad_k`: 0 when absent.
bool pad_k_of(const Config& c);
/// Whether padding K makes every operand row of `p` 16-byte aligned where it was not: K is
/// not a multiple of 16 bytes, layout nt, or nn with N aligned.
bool pads(const Problem& p);
/// K rounded up to 16 bytes of `p`'s dtype.
int64_t padded_k(const Problem& p);
/// Kernel 1: A, B -> Ap, Bp with zeros past K.
Kernel build_pad(DType dtype, const std::string& layout);
/// Ap and Bp (intermediates 0 and 1 of the program).
std::vector<ArgSpec> pad_intermediates(const Problem& p);

} // namespace tp::ops::padk
