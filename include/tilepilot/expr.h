// Scalar expressions of the tile language: immediates, variables, arithmetic, math, select and
// casts. An Expr is an immutable handle to an IR node (src/ir/IR.h); arithmetic on handles
// builds new nodes. Integer division and modulo truncate toward zero, as in C++.
#pragma once
#include <concepts>
#include <memory>
#include <source_location>
#include <string>

#include "tilepilot/dtype.h"

namespace tp {
namespace ir {
struct ExprNode;
}

class Expr {
public:
  Expr() = default;
  template <std::integral T>
  Expr(T v) : Expr(make_int(static_cast<int64_t>(v))) {}
  template <std::floating_point T>
  Expr(T v) : Expr(make_float(static_cast<double>(v))) {}
  explicit Expr(std::shared_ptr<const ir::ExprNode> n) : node_(std::move(n)) {}

  bool defined() const { return node_ != nullptr; }
  const ir::ExprNode* get() const { return node_.get(); }
  const ir::ExprNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const ir::ExprNode>& ptr() const { return node_; }
  DType dtype() const;
  /// The value when this is an integer immediate (after folding), else nullptr.
  const int64_t* as_int() const;

private:
  static Expr make_int(int64_t v);
  static Expr make_float(double v);
  std::shared_ptr<const ir::ExprNode> node_;
};

/// A named scalar variable: a block index, a loop counter or a symbolic size.
class Var : public Expr {
public:
  explicit Var(const std::string& name, DType t = i32);
  const std::string& name() const;
  explicit Var(std::shared_ptr<const ir::ExprNode> n) : Expr(std::move(n)) {}
};

/// A symbolic tensor extent, bound from the tensors' shapes at launch.
class Dim : public Var {
public:
  explicit Dim(const std::string& name) : Var(name, i32) {}
};

Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr operator/(const Expr& a, const Expr& b);
Expr operator%(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
Expr operator==(const Expr& a, const Expr& b);
Expr operator!=(const Expr& a, const Expr& b);
Expr operator<(const Expr& a, const Expr& b);
Expr operator<=(const Expr& a, const Expr& b);
Expr operator>(const Expr& a, const Expr& b);
Expr operator>=(const Expr& a, const Expr& b);
Expr operator&&(const Expr& a, const Expr& b);
Expr operator||(const Expr& a, const Expr& b);
Expr operator!(const Expr& a);

// Bit operators: integer operands only (a float operand is a user error, reported when the
// kernel is built, at the statement that uses it), computed on 32-bit
// two's complement values. `>>` is an arithmetic shift (it copies the sign bit, as C++ does for
// int), `<<` wraps, and the shift count is taken modulo 32. Loads of i8/u8/int4 elements give
// their value as an i32 (u8: 0..255), so `b >> 4` of a u8 byte is its high nibble.
Expr operator&(const Expr& a, const Expr& b);
Expr operator|(const Expr& a, const Expr& b);
Expr operator^(const Expr& a, const Expr& b);
Expr operator~(const Expr& a);
Expr operator<<(const Expr& a, const Expr& b);
Expr operator>>(const Expr& a, const Expr& b);
/// Element `which` (0: low nibble, bits [3:0]; 1: high nibble) of a byte holding two int4
/// values, sign-extended to -8..7: the layout of the int4 dtype. For the bytes of an int4
/// weight read as u8: `unpack_int4(W(k / 2), k % 2)` is element k.
Expr unpack_int4(const Expr& byte, const Expr& which);
/// The byte holding int4 values lo (low nibble) and hi, each taken modulo 16; store it into a u8.
Expr pack_int4(const Expr& lo, const Expr& hi);

Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);
Expr abs(const Expr& a);
Expr exp(const Expr& a);
Expr exp2(const Expr& a);
Expr log(const Expr& a);
Expr log2(const Expr& a);
Expr sqrt(const Expr& a);
Expr rsqrt(const Expr& a);
// Accurate f32 math (CUDA's tanhf, erff, powf; the interpreter computes in double and rounds to
// f32). The two backends agree to within CUDA's documented error bounds: tanh and erf 2 ulp,
// pow 4 ulp (for x > 0), sigmoid (1 / (1 + exp(-x)), exp 2 ulp) 3 ulp; not bit for bit.
Expr tanh(const Expr& a);
Expr erf(const Expr& a);
Expr sigmoid(const Expr& a);
/// a to the power b, as powf (a < 0 with a non-integer b gives NaN).
Expr pow(const Expr& a, const Expr& b);
/// `c ? a : b`, element-wise; a and b are promoted to a common type.
Expr select(const Expr& c, const Expr& a, const Expr& b);
/// Convert to `t`, rounding as a store into `t` would.
Expr cast(DType t, const Expr& a);
/// Reinterpret 32 bits: bitcast(f32, i) is the f32 whose bits are the i32 i (an integer of a
/// narrower type is widened to i32 first, as arithmetic does); bitcast(i32, x) the bits of the
/// f32 x (a bf16 or f16 x is widened to f32 first, exactly). Any other pair is a user error.
/// A NaN's payload is not kept across backends: only that it is a NaN.
Expr bitcast(DType t, const Expr& a, std::source_location loc = std::source_location::current());
/// ceil(a / b) for non-negative integers.
Expr ceildiv(const Expr& a, const Expr& b);
/// +infinity / -infinity as f32 immediates.
Expr infinity();

} // namespace tp
