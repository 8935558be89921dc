// Runs of shared writes: a parallel loop spread over the threads (no register fragment to
// follow) whose body computes 16-bit elements of shared tiles at column j, its innermost
// variable, gives each thread W adjacent columns (8, 4 or 2) and writes each run with one 16-,
// 8- or 4-byte store (runs of 8 and 4 convert two values an instruction); lets that read the
// same columns of another shared tile take their run with one vector load. Element-wise work
// that fills a gemm operand (unpacking packed words, an operand computed rather than copied)
// then costs an eighth of the shared stores and half the conversions.
#pragma once
#include <functional>

#include "passes/LowerContext.h"

namespace tp::passes {

/// The lowered loop over runs of columns for parallel loop `p`, or an undefined Stmt when the
/// loop is not of the form: its body lets and stores (no branches, loops, atomics), every store
/// into a bf16 or f16 shared tile with the innermost variable as the last index and nowhere else
/// in the indices, the value an f32; no tile the body writes is also read; a run width W that
/// divides the innermost extent and keeps every written tile's runs adjacent and aligned to
/// their size (docs/schedules.md). `lower` lowers element accesses (the driver's
/// AccessLowering). Adds a note to cx.write_notes when the loop writes shared tiles: paired, or
/// why not.
ir::Stmt pair_shared_writes(LowerContext& cx, const ir::Parallel* p,
                            const std::function<ir::Stmt(const ir::Stmt&)>& lower);

} // namespace tp::passes
