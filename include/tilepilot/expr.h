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

Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);
Expr abs(const Expr& a);
Expr exp(const Expr& a);
Expr exp2(const Expr& a);
Expr log(const Expr& a);
Expr log2(const Expr& a);
Expr sqrt(const Expr& a);
Expr rsqrt(const Expr& a);
/// `c ? a : b`, element-wise; a and b are promoted to a common type.
Expr select(const Expr& c, const Expr& a, const Expr& b);
/// Convert to `t`, rounding as a store into `t` would.
Expr cast(DType t, const Expr& a);
/// ceil(a / b) for non-negative integers.
Expr ceildiv(const Expr& a, const Expr& b);
/// +infinity / -infinity as f32 immediates.
Expr infinity();

} // namespace tp
