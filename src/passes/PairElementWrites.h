// Paired element writes: a parallel loop over a gemm accumulator that writes each element into
// a global tensor (an epilogue written element by element, a split-K epilogue, the tile form of
// atomic_add) writes two adjacent columns at once: one 2-element store, or one
// red.global.add.v2.f32, instead of two element writes.
#pragma once
#include "passes/LowerContext.h"

namespace tp::passes {

/// `body` is the lowered body of a parallel loop anchored on `anchor`, run for register `r` of
/// `regs`. When the anchor is an accumulator whose registers 2q and 2q+1 hold adjacent columns
/// of a row, and the body is lets and guards around one write of an f32 value into a global
/// tensor (a store into bf16, f16 or f32; an atomic_add into f32, on sm_90a), returns the loop
/// over register pairs: one paired write where both elements are in bounds and adjacent, the
/// two element writes (each under its own guard) otherwise. Returns an undefined Stmt when the
/// loop is not of that form.
/// `loc` names the loop in the note it adds to cx.write_notes when the loop writes global
/// memory: what was paired, or why nothing was.
ir::Stmt pair_element_writes(LowerContext& cx, const ir::Buffer& anchor, const Var& r, int64_t regs,
                             const ir::Stmt& body, const SourceLoc& loc);

} // namespace tp::passes
