// Packed products: a run of 16-bit shared writes (passes/PairSharedWrites.h) whose values are
// small integers, exact 16-bit values, or products of the two is computed two values at a time
// in the tile's own packed arithmetic (fma.rn.{bf16x2,f16x2}), with no f32 -> 16-bit
// conversion. The bits are those of the f32 value rounded once, because every step is exact
// but the last:
// - an integer e in [0, base) placed in the low mantissa bits of `base` (128 for bf16, 1024 for
//   f16) is the value base + e; subtracting base + C leaves e - C, an integer that fits the type;
// - a product of such an integer (at most 2^p in magnitude, p the type's significand bits) and a
//   value of the type has at most 2p + 1 <= 24 significant bits, none below the type's smallest
//   subnormal, so its f32 value is exact and one rounding to the type gives what fma.rn does.
// A loop that unpacks 4-bit codes into a gemm operand writes it so: (code - 8) * scale. On sm_90
// the conversions this replaces (cvt.rn.bf16x2.f32) run on a low-throughput pipe, and such a
// loop overlaps the tensor cores only while it is shorter than their work.
#pragma once
#include <map>
#include <vector>

#include "ir/IR.h"

namespace tp::passes {

/// One run's store of W values (f32, each rounded to `dtype` when stored) at `ptr` as packed
/// words, or undefined when some value is not a small integer, an exact `dtype` value or their
/// product, in the same form for every value of the run. `lets`: the run's let values by
/// variable uid, which a value may name. Forms:
/// - small integer: bitcast(f32, E | 0x4B000000) - (2^23 + C), or cast(f32, E), with E an
///   integer known to lie in [0, base) (a constant, or masked with a constant) and every
///   integer on the way exact in `dtype`;
/// - exact value: cast(f32, X) with X of type `dtype`;
/// - their product, either way round.
ir::Stmt packed_products(DType dtype, const Expr& ptr, const std::vector<Expr>& values,
                         const std::map<uint64_t, Expr>& lets);

/// The packed words (i32, value 2h in the low half of word h) that packed_products stores, or
/// none when the values are not of one packed form. For writers that keep the words in
/// registers rather than store them (passes/PackFragmentWrites.h).
std::vector<Expr> packed_words(DType dtype, const std::vector<Expr>& values,
                               const std::map<uint64_t, Expr>& lets);

/// The largest magnitude of an integer the packed form lets through for `dtype` (bf16 or f16):
/// 2^p, p its significand bits, so that every integer on the way is exact in `dtype`.
int64_t packed_integer_limit(DType dtype);

} // namespace tp::passes
