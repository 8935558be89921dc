// Paired element writes: a parallel loop over a gemm accumulator that writes each element into
// a global tensor (an epilogue written element by element, a split-K epilogue, the tile form of
// atomic_add) writes two adjacent columns at once: one 2-element store, or one
// red.global.add.v2.f32, instead of two element writes.
#pragma once
#include "passes/LowerContext.h"

namespace tp::passes {

/// `body` is the lowered body of a parallel loop anchored on `anchor`, run for each register `r`
/// of the anchor's layout. When the anchor is an accumulator whose registers 2q and 2q+1 hold
/// adjacent columns of a row (FragmentLayout::adjacent_column_pairs), and the body is lets and
/// guards around one write of an f32 value into a global tensor (an atomic_add into f32 on
/// sm_90a; a store into bf16, f16 or f32 where the kernel asks, annotate("paired_stores", "1")),
/// returns the loop over register pairs: one paired write where both elements are in bounds,
/// adjacent and aligned, the two element writes (each under its own guard) otherwise. Returns
/// an undefined Stmt when the loop is not of that form. `loc` names the loop in the note it
/// adds to cx.write_notes when the loop writes global memory: what was paired, or why not.
ir::Stmt pair_element_writes(LowerContext& cx, const ir::Buffer& anchor, const Var& r,
                             const ir::Stmt& body, const SourceLoc& loc);

} // namespace tp::passes
