// Flattens the builder's lets for the CUDA lowering: a `let` recorded by the builder is a Let
// whose body is the rest of its scope; this pass moves that body's statements into the
// enclosing statement list after a Let without a body (IR.h), so that passes which walk a
// scope's statements in order (pipeline planning, barrier insertion, the warp-specialized
// lowering) see the tile ops after a let as siblings of the ops before it.
#pragma once
#include "ir/IR.h"

namespace tp::passes {

/// `s` with every Let that has a body flattened into its enclosing statement list. The value
/// is still computed once, where the let stood; the CUDA emitter declares it there.
ir::Stmt flatten_lets(const ir::Stmt& s);

} // namespace tp::passes
