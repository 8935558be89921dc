// Divisibility of integer index expressions, from their form alone.
#include "ir/KnownDivisor.h"

#include <cstdlib>
#include <numeric>

namespace tp::ir {

namespace {

/// a * b as a divisor; when the product would leave 2^40 (far past any 32-bit index), a alone
/// still divides it.
int64_t product(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a <= (int64_t{1} << 40) / b ? a * b : a;
}

} // namespace

int64_t known_divisor(const Expr& e) {
  if (const int64_t* v = e.as_int()) return std::llabs(*v);
  if (const auto* s = as<Select>(e)) return std::gcd(known_divisor(s->a), known_divisor(s->b));
  const auto* b = as<Binary>(e);
  if (!b || is_float(b->dtype)) return 1;
  const int64_t da = known_divisor(b->a), db = known_divisor(b->b);
  switch (b->op) {
  case BinOp::add:
  case BinOp::sub:
  case BinOp::min:
  case BinOp::max:
    return std::gcd(da, db);
  case BinOp::mul:
    return product(da, db);
  case BinOp::mod:
    // a % c = a - c * trunc(a / c): a multiple of what divides both; 0 when c divides a.
    if (const int64_t* c = b->b.as_int(); c && *c != 0 && da % *c == 0) return 0;
    return std::gcd(da, db);
  default:
    return 1;
  }
}

bool known_multiple_of(const Expr& e, int64_t m) {
  return known_divisor(e) % m == 0;
}

} // namespace tp::ir
