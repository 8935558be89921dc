// Arithmetic and math on Expr handles: thin wrappers over the IR factories, which promote types
// and fold constants.
#include <limits>

#include "ir/IR.h"

namespace tp {
using ir::BinOp;
using ir::Binary;
using ir::Call;
using ir::CallOp;

Expr operator+(const Expr& a, const Expr& b) { return Binary::make(BinOp::add, a, b); }
Expr operator-(const Expr& a, const Expr& b) { return Binary::make(BinOp::sub, a, b); }
Expr operator*(const Expr& a, const Expr& b) { return Binary::make(BinOp::mul, a, b); }
Expr operator/(const Expr& a, const Expr& b) { return Binary::make(BinOp::div, a, b); }
Expr operator%(const Expr& a, const Expr& b) { return Binary::make(BinOp::mod, a, b); }
Expr operator-(const Expr& a) { return Call::make(CallOp::neg, {a}); }
Expr operator==(const Expr& a, const Expr& b) { return Binary::make(BinOp::eq, a, b); }
Expr operator!=(const Expr& a, const Expr& b) { return Binary::make(BinOp::ne, a, b); }
Expr operator<(const Expr& a, const Expr& b) { return Binary::make(BinOp::lt, a, b); }
Expr operator<=(const Expr& a, const Expr& b) { return Binary::make(BinOp::le, a, b); }
Expr operator>(const Expr& a, const Expr& b) { return Binary::make(BinOp::gt, a, b); }
Expr operator>=(const Expr& a, const Expr& b) { return Binary::make(BinOp::ge, a, b); }
Expr operator&&(const Expr& a, const Expr& b) { return Binary::make(BinOp::land, a, b); }
Expr operator||(const Expr& a, const Expr& b) { return Binary::make(BinOp::lor, a, b); }
Expr operator!(const Expr& a) { return Call::make(CallOp::lnot, {a}); }

Expr min(const Expr& a, const Expr& b) { return Binary::make(BinOp::min, a, b); }
Expr max(const Expr& a, const Expr& b) { return Binary::make(BinOp::max, a, b); }
Expr abs(const Expr& a) { return Call::make(CallOp::abs, {a}); }
Expr exp(const Expr& a) { return Call::make(CallOp::exp, {a}); }
Expr exp2(const Expr& a) { return Call::make(CallOp::exp2, {a}); }
Expr log(const Expr& a) { return Call::make(CallOp::log, {a}); }
Expr log2(const Expr& a) { return Call::make(CallOp::log2, {a}); }
Expr sqrt(const Expr& a) { return Call::make(CallOp::sqrt, {a}); }
Expr rsqrt(const Expr& a) { return Call::make(CallOp::rsqrt, {a}); }
Expr select(const Expr& c, const Expr& a, const Expr& b) { return ir::Select::make(c, a, b); }
Expr cast(DType t, const Expr& a) { return ir::Cast::make(t, a); }
Expr ceildiv(const Expr& a, const Expr& b) { return (a + b - 1) / b; }
Expr infinity() { return ir::FloatImm::make(std::numeric_limits<double>::infinity()); }

} // namespace tp
