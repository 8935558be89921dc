// What is known, before any value is bound, about the factors of an integer index expression.
// Lowering uses it to drop run-time alignment tests whose answer the index's form already gives
// (a tile offset `bx * 256` plus an even register column is even whatever bx is).
#pragma once
#include <cstdint>

#include "ir/IR.h"

namespace tp::ir {

/// A positive integer that divides every value `e` can take, or 0 when `e` is always 0 (0 is
/// divisible by everything). 1 when nothing is known: a variable, a load, a division. Exact for
/// constants, and closed under +, -, *, min, max, select, and % by a constant.
int64_t known_divisor(const Expr& e);

/// Whether every value of integer expression `e` is a multiple of `m` (m > 0).
bool known_multiple_of(const Expr& e, int64_t m);

} // namespace tp::ir
