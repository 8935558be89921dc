// Sinks a fragment's load from global memory into the element-wise loops that read it, when
// those loops run over a gemm accumulator (an epilogue's bias or residual). Instead of
//   copy(R.tile(y, x), r); parallel(i, j) { acc(i, j) = f(acc(i, j), r(i, j)); }
// the loop reads R[y + i, x + j] itself (0 out of bounds, as the copy would), so r never exists:
// each thread loads the elements of its accumulator registers where it uses them. Held whole,
// r would take as many registers as the accumulator (128 f32 per thread at 128 x 256: 256 in
// all, spilled).
//
// A fragment F is sunk when all of these hold (anything else keeps the copy):
//   - exactly one statement writes F: a copy of a global region into all of F;
//   - F is otherwise only read, by element, in parallel loops of F's rank (unit extents not
//     counted) that come after the copy in the same statement list and that access a fragment
//     with an accumulator layout (element-wise kernels keep their vectorized tile copies; a
//     vector such as a bias b(j) keeps its copy: read from global memory at every use, ptxas
//     hoisted its loads and spilled);
//   - nothing in the kernel writes the global tensor (the copy's time of reading does not matter).
// The interpreter's result is the same: the copy would have read those elements with 0 for
// out-of-bounds ones, converted to F's dtype.
#pragma once
#include "ir/IR.h"
#include "passes/InferLayouts.h"

namespace tp::passes {

/// `k`'s body with the fragments above sunk (the same Stmt when there are none); `l` is the
/// layout inference of `k` (it says which fragments are accumulators).
ir::Stmt sink_fragment_loads(const ir::KernelNode& k, const LayoutInfo& l);

} // namespace tp::passes
