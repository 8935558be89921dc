// Paired shared writes: a parallel loop spread over the threads (no register fragment to follow)
// whose body computes 16-bit elements of shared tiles at column j, its innermost variable, runs
// two adjacent columns an iteration and writes each pair with one 4-byte store of two values
// converted together. Element-wise work that fills a gemm operand (unpacking int4 weights, an
// operand computed rather than copied) then costs half the shared stores and conversions.
#pragma once
#include <functional>

#include "passes/LowerContext.h"

namespace tp::passes {

/// The lowered loop over column pairs for parallel loop `p`, or an undefined Stmt when the loop
/// is not of the form: its innermost extent even; its body lets and stores (no branches, loops,
/// atomics), every store into a bf16 or f16 shared tile with the innermost variable as the last
/// index and nowhere else in the indices, the tile's rows an even number of elements (so that
/// columns 2c and 2c + 1 are adjacent and the pair 4-byte aligned in every layout), the value an
/// f32; no tile the body writes is also read. `lower` lowers element accesses (the driver's
/// AccessLowering). Adds a note to cx.write_notes when the loop writes shared tiles: paired, or
/// why not.
ir::Stmt pair_shared_writes(LowerContext& cx, const ir::Parallel* p,
                            const std::function<ir::Stmt(const ir::Stmt&)>& lower);

} // namespace tp::passes
