// Whether a list of statements provably writes every element of a tile, from the statements'
// form alone. A schedule that gives a tile one buffer per in-flight iteration (rotation) is
// only the same program as one buffer when each iteration writes the whole tile before reading
// it: an element it skipped would be read from the other buffer, an iteration older.
#pragma once
#include <vector>

#include "ir/IR.h"

namespace tp::ir {

/// True when `stmts`, run in order, unconditionally write every element of `b` (a buffer of
/// constant shape). Proven forms: a fill or copy whose region covers `b`, and a parallel loop
/// whose unconditional stores to `b` index each dimension as `v * m + c` (v a loop variable,
/// constant m >= 1 and 0 <= c < m, v's extent times m the dimension) and together take every
/// offset c in every dimension. False whenever the form does not prove it.
bool writes_every_element(const std::vector<Stmt>& stmts, const Buffer& b);

} // namespace tp::ir
