// Arithmetic and math on Expr handles: thin wrappers over the IR factories, which promote types
// and fold constants.
#include <limits>

#include "ir/IR.h"
#include "lang/Builder.h"

namespace tp {
using ir::Binary;
using ir::BinOp;
using ir::Call;
using ir::CallOp;

Expr operator+(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::add, a, b);
}
Expr operator-(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::sub, a, b);
}
Expr operator*(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::mul, a, b);
}
Expr operator/(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::div, a, b);
}
Expr operator%(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::mod, a, b);
}
Expr operator-(const Expr& a) {
  return Call::make(CallOp::neg, {a});
}
Expr operator==(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::eq, a, b);
}
Expr operator!=(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::ne, a, b);
}
Expr operator<(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::lt, a, b);
}
Expr operator<=(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::le, a, b);
}
Expr operator>(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::gt, a, b);
}
Expr operator>=(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::ge, a, b);
}
Expr operator&&(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::land, a, b);
}
Expr operator||(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::lor, a, b);
}
Expr operator!(const Expr& a) {
  return Call::make(CallOp::lnot, {a});
}

// A float operand of a bit operator is reported by the verifier, at the statement that uses
// the expression (these operators have no source location of their own).
Expr operator&(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::bit_and, a, b);
}
Expr operator|(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::bit_or, a, b);
}
Expr operator^(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::bit_xor, a, b);
}
Expr operator<<(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::shl, a, b);
}
Expr operator>>(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::shr, a, b);
}
Expr operator~(const Expr& a) {
  return Call::make(CallOp::bit_not, {a});
}
Expr unpack_int4(const Expr& byte, const Expr& which) {
  // (n ^ 8) - 8 sign-extends a nibble n.
  return (((byte >> (which * 4)) & 15) ^ 8) - 8;
}
Expr pack_int4(const Expr& lo, const Expr& hi) {
  return (lo & 15) | ((hi & 15) << 4);
}

Expr min(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::min, a, b);
}
Expr max(const Expr& a, const Expr& b) {
  return Binary::make(BinOp::max, a, b);
}
Expr abs(const Expr& a) {
  return Call::make(CallOp::abs, {a});
}
Expr exp(const Expr& a) {
  return Call::make(CallOp::exp, {a});
}
Expr exp2(const Expr& a) {
  return Call::make(CallOp::exp2, {a});
}
Expr log(const Expr& a) {
  return Call::make(CallOp::log, {a});
}
Expr log2(const Expr& a) {
  return Call::make(CallOp::log2, {a});
}
Expr sqrt(const Expr& a) {
  return Call::make(CallOp::sqrt, {a});
}
Expr rsqrt(const Expr& a) {
  return Call::make(CallOp::rsqrt, {a});
}
Expr tanh(const Expr& a) {
  return Call::make(CallOp::tanh, {a});
}
Expr erf(const Expr& a) {
  return Call::make(CallOp::erf, {a});
}
Expr sigmoid(const Expr& a) {
  return Call::make(CallOp::sigmoid, {a});
}
Expr pow(const Expr& a, const Expr& b) {
  return Call::make(CallOp::pow, {a, b});
}
Expr select(const Expr& c, const Expr& a, const Expr& b) {
  return ir::Select::make(c, a, b);
}
Expr cast(DType t, const Expr& a) {
  return ir::Cast::make(t, a);
}
Expr bitcast(DType t, const Expr& a, std::source_location loc) {
  const bool from_float = is_float(a.dtype());
  if (t == DType::f32 && !from_float && a.dtype() != DType::boolean)
    return Call::make(CallOp::bits_to_f32, {a});
  if (t == DType::i32 && from_float) return Call::make(CallOp::f32_to_bits, {a});
  user_error(lang::to_loc(loc))
      << "bitcast(" << dtype_name(t) << ", x) with x of type " << dtype_name(a.dtype())
      << ": bitcast reinterprets 32 bits, an integer's as f32 (bitcast(f32, i)) or an "
         "f32's as i32 (bitcast(i32, x)); to convert a value, use cast("
      << dtype_name(t) << ", x)";
  return Expr(); // not reached: the report above throws
}
Expr ceildiv(const Expr& a, const Expr& b) {
  return (a + b - 1) / b;
}
Expr infinity() {
  return ir::FloatImm::make(std::numeric_limits<double>::infinity());
}

} // namespace tp
