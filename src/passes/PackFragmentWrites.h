// Packed fragment writes: a parallel loop over a 16-bit register fragment whose registers 2q and
// 2q + 1 hold adjacent columns of one row (the wgmma and mma layouts: a gemm's A operand
// computed in registers, such as weights unpacked from packed words) computes each register
// pair as one packed word in the fragment's own arithmetic (passes/PackedProducts.h) when the
// values are packed products, instead of two f32 values and a conversion each. The bits are
// those of each f32 value rounded once, as the element-by-element loop writes them.
#pragma once
#include "passes/LowerContext.h"

namespace tp::passes {

/// `body` is the lowered body of a parallel loop anchored on `anchor`, run for each register `r`
/// of the anchor's layout. When the anchor is a bf16 or f16 fragment with adjacent column pairs
/// (FragmentLayout::adjacent_column_pairs) and the body is lets around one write of register r
/// whose f32 value (before the store's conversion) does not read the anchor and is a packed
/// product for both registers of a pair, returns the loop over register pairs that writes
/// each pair's halves from one packed word. Returns an undefined Stmt otherwise. `loc` names the
/// loop in the note it adds to cx.write_notes: packed, or why not.
ir::Stmt pack_fragment_writes(LowerContext& cx, const ir::Buffer& anchor, const Var& r,
                              const ir::Stmt& body, const SourceLoc& loc);

} // namespace tp::passes
