// Whether a copy between a global tensor and a tile moves whole 16-byte chunks of the tensor's
// rows, as a condition on the kernel's parameters where it is known only at run time. The
// passes that version a kernel on alignment (StageFragmentLoads, StageUnalignedStores) share it.
#pragma once
#include <optional>

#include "ir/IR.h"

namespace tp::passes {

/// The value of a boolean or integer immediate, if `e` is one.
std::optional<bool> known(const Expr& e);

/// a && b, folded where either is known (Binary::make folds integers, not booleans); a may be
/// undefined (then b).
Expr conj(const Expr& a, const Expr& b);

/// Every row of tensor g starts 16-byte aligned (its row length, or for a strided view its
/// outer strides, a multiple of 16 bytes, and a unit inner stride) and the tile's innermost
/// offsets `col0` and `col1` are multiples of 16 bytes. A copy whose offset is linear in a
/// loop's variable passes its first two iterations' offsets: then it is aligned in all.
Expr chunks_aligned(const ir::Buffer& g, const Expr& col0, const Expr& col1);

} // namespace tp::passes
