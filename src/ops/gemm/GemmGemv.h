// GEMV for decode GEMMs of a few rows: C = A . B^T with B stored [N, K] (layout nt, a framework
// Linear's weight) or C = A . B with B stored [K, N] (layout nn), on the CUDA cores. A wgmma tile
// of 64 rows spends most of them on nothing at M <= 8; the cost is reading B once, so the kernel is
// a matrix-vector product whose only aim is B's bandwidth: each block owns `bn` rows of B (outputs)
// and `gemv` rows of A, walks K in steps of `bk` through a `stages`-deep cp.async pipeline,
// multiplies each B tile by the matching slices of its A rows into per-element partials (each B
// element loaded serves every row), and reduces them along K once at the end. In nt a block's B
// tile is bn rows of bk; in nn it is bk rows of bn columns, so both read B in 16-byte runs along
// its rows.
//
// Knob gemv=R (R >= 1 rows a block) selects it (GemmOp::build); bn, bk, stages and threads are
// its own, bm is not read. Layouts nt and nn (tn's A columns are strided; GemmOp::validate
// says so). B is read ceil(M / R) times, so it pays only where M <= R.
#pragma once
#include <string>

#include "tilepilot/operator.h"

namespace tp::ops::gemv {

/// The most rows of A a block takes: each row holds bn x bk / threads partials per thread.
constexpr int64_t kMaxRows = 16;

/// Whether the config selects the GEMV (gemv >= 1).
bool gemv_of(const Config& c);
/// The config's `gemv`: rows of A (and of C) a block computes; 0 when absent.
int64_t rows_of(const Config& c);
/// The kernel: parameters A [M, K], B [N, K] (nt) or [K, N] (nn), C [M, N]; grid
/// ceil(N / bn) x ceil(M / rows).
Kernel build_gemv(DType dtype, const std::string& layout, const Config& c);
/// The sm_90a config for M = 1, layout nt.
Config gemv_config();
/// The sm_90a config for M = 1, layout nn.
Config gemv_config_nn();

} // namespace tp::ops::gemv
