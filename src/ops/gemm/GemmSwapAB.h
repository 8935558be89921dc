// The swapped GEMM for decode shapes (swap_ab=1): C^T = op(B)^T op(A)^T, so that N, the long
// side, runs along the tensor cores' rows (64 a warpgroup) and M, the few rows of a decode,
// along their columns (bm: wgmma's N, a multiple of 16). The plain kernel spends 64 rows of
// each tile, and of each pipeline stage, on M = 1 to 16; here a stage is B's bk x bn tile and
// A's bm x bk rows, so nearly all of shared memory keeps B's bytes in flight.
//
// cuBLASLt 13.1 runs M = 4, N = K = 4096 (layout nn) this way on an H100: one kernel of
// 64 x 8 tiles, 64 blocks, 15.1 us (ncu, 2026-12-07), where ours split K over a second kernel
// (15.2 + 4.3 us). The kernel: parameters A, B (as the layout gives them), C [M, N]; grid
// ceil(N / bn) x ceil(M / bm); bn = 64 per consumer warpgroup (threads / 128 of them).
#pragma once
#include <string>

#include "tilepilot/operator.h"

namespace tp::ops::swapab {

/// Whether the config asks for the swapped form (swap_ab = 1; absent means 0).
bool swapped(const Config& c);
/// The swapped kernel for `layout` (nn, nt or tn).
Kernel build_swapped(DType dtype, const std::string& layout, const Config& c);
/// The rules between knobs the swapped form adds, as user errors in the knobs' words.
void validate(const Config& c);

} // namespace tp::ops::swapab
