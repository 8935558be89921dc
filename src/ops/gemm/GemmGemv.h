// GEMV for decode GEMMs of one row: C[0, :] = A[0, :] . B^T with B stored [N, K] (layout nt,
// a framework Linear's weight), on the CUDA cores. A wgmma tile of 64 rows spends 63 of them
// on nothing at M = 1; the cost is reading B once, so the kernel is a matrix-vector product
// whose only aim is B's bandwidth: each block owns `bn` rows of B (outputs), walks K in steps
// of `bk` through a `stages`-deep cp.async pipeline, multiplies each B tile by the matching
// slice of A's row into per-element partials, and reduces them along K once at the end.
//
// Knob gemv=1 selects it (GemmOp::build); bn, bk, stages and threads are its own, bm is not
// read. It takes M = 1 and layout nt only (GemmOp::validate says so otherwise).
#pragma once
#include <string>

#include "tilepilot/operator.h"

namespace tp::ops::gemv {

/// The config's `gemv`: 0 when absent.
bool gemv_of(const Config& c);
/// The kernel: parameters A [1, K], B [N, K], C [1, N]; grid ceil(N / bn).
Kernel build_gemv(DType dtype, const Config& c);
/// The sm_90a config for M = 1, layout nt.
Config gemv_config();

} // namespace tp::ops::gemv
