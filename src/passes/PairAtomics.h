// Paired atomics: a parallel loop over a gemm accumulator that adds each element atomically
// into a global f32 tensor (a split-K epilogue, the tile form of atomic_add) issues one
// red.global.add.v2.f32 per pair of adjacent columns instead of two scalar atomics.
#pragma once
#include "passes/LowerContext.h"

namespace tp::passes {

/// `body` is the lowered body of a parallel loop anchored on `anchor`, run for register `r` of
/// `regs`. When the anchor is an accumulator whose registers 2q and 2q+1 hold adjacent columns
/// of a row, the target has vector reductions (sm_90a), and the body is lets and guards around
/// one element atomic_add into a global f32 tensor, returns the loop over register pairs: one
/// paired atomic where both elements are in bounds and adjacent, the two element atomics (each
/// under its own guard) otherwise. Returns an undefined Stmt when the loop is not of that form.
ir::Stmt pair_atomics(const LowerContext& cx, const ir::Buffer& anchor, const Var& r, int64_t regs,
                      const ir::Stmt& body);

} // namespace tp::passes
