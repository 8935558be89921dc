#include "passes/PackedProducts.h"

#include <cmath>
#include <cstdlib>
#include <optional>

#include "passes/LowerContext.h"

namespace tp::passes {

namespace {

/// What one value is, in the forms packed_products takes.
struct Form {
  enum Kind { none, small_int, exact, product } kind = none;
  Expr e;      // small_int: the integer E in [0, base)
  int64_t c{}; // small_int: the value is E - c
  Expr x;      // exact: the f32 value that holds a value of the type
};

/// Follows a variable to its let's value (a value may name a let of the run).
Expr resolve(const Expr& v, const std::map<uint64_t, Expr>& lets) {
  if (const auto* var = ir::as<ir::Variable>(v))
    if (auto it = lets.find(var->uid); it != lets.end()) return it->second;
  return v;
}

/// [0, hi] for an integer known to be non-negative and at most hi: a constant, or a value
/// masked with a non-negative constant.
std::optional<int64_t> known_max(const Expr& v, const std::map<uint64_t, Expr>& lets) {
  const Expr e = resolve(v, lets);
  if (const auto* i = ir::as<ir::IntImm>(e))
    return i->value >= 0 ? std::optional(i->value) : std::nullopt;
  if (const auto* b = ir::as<ir::Binary>(e); b && b->op == ir::BinOp::bit_and)
    for (const Expr& m : {b->a, b->b})
      if (const auto* i = ir::as<ir::IntImm>(m); i && i->value >= 0) return i->value;
  return std::nullopt;
}

/// An f32 constant that is an integer, or nothing.
std::optional<int64_t> integer_constant(const Expr& v) {
  const auto* f = ir::as<ir::FloatImm>(v);
  if (!f || f->value != std::floor(f->value) || std::fabs(f->value) > 1e9) return std::nullopt;
  return static_cast<int64_t>(f->value);
}

/// bitcast(f32, E | 0x4B000000): the f32 2^23 + E for E in [0, 2^23). Returns E.
Expr magic_integer(const Expr& v, const std::map<uint64_t, Expr>& lets) {
  const auto* call = ir::as<ir::Call>(resolve(v, lets));
  if (!call || call->op != ir::CallOp::bits_to_f32) return {};
  const auto* o = ir::as<ir::Binary>(resolve(call->args[0], lets));
  if (!o || o->op != ir::BinOp::bit_or) return {};
  for (int side = 0; side < 2; ++side) {
    const auto* m = ir::as<ir::IntImm>(side ? o->a : o->b);
    const Expr e = side ? o->b : o->a;
    const auto hi = known_max(e, lets);
    if (m && m->value == 0x4B000000 && hi && *hi < (int64_t{1} << 23)) return e;
  }
  return {};
}

Form small_int(const Expr& v, const std::map<uint64_t, Expr>& lets) {
  const Expr e = resolve(v, lets);
  Form f;
  if (const auto* c = ir::as<ir::Cast>(e);
      c && c->dtype == DType::f32 && is_int(c->value.dtype()) && known_max(c->value, lets)) {
    f.kind = Form::small_int;
    f.e = c->value;
    return f;
  }
  const auto* b = ir::as<ir::Binary>(e);
  if (!b || (b->op != ir::BinOp::sub && b->op != ir::BinOp::add)) return f;
  const auto k = integer_constant(b->b);
  const Expr inner = magic_integer(b->a, lets);
  if (!k || !inner.defined()) return f;
  // (2^23 + E) - k = E - (k - 2^23); (2^23 + E) + k = E - (-k - 2^23).
  f.kind = Form::small_int;
  f.e = inner;
  f.c = (b->op == ir::BinOp::sub ? *k : -*k) - (int64_t{1} << 23);
  return f;
}

Form exact(const Expr& v, DType dtype, const std::map<uint64_t, Expr>& lets) {
  const auto* c = ir::as<ir::Cast>(resolve(v, lets));
  Form f;
  if (c && c->dtype == DType::f32 && c->value.dtype() == dtype) {
    f.kind = Form::exact;
    f.x = v;
  }
  return f;
}

Form classify(const Expr& v, DType dtype, const std::map<uint64_t, Expr>& lets) {
  if (Form f = small_int(v, lets); f.kind != Form::none) return f;
  if (Form f = exact(v, dtype, lets); f.kind != Form::none) return f;
  const auto* b = ir::as<ir::Binary>(v);
  if (!b || b->op != ir::BinOp::mul || v.dtype() != DType::f32) return {};
  for (int side = 0; side < 2; ++side) {
    Form i = small_int(side ? b->b : b->a, lets), x = exact(side ? b->a : b->b, dtype, lets);
    if (i.kind == Form::small_int && x.kind == Form::exact) {
      i.kind = Form::product;
      i.x = x.x;
      return i;
    }
  }
  return {};
}

/// A bit field inside one byte: E = (X >> k) & m or X & m, m = 2^b - 1, k % 8 + b <= 8. Two such
/// fields at the same place in two words are gathered with one byte permute (which also serves
/// the byte's other field), so the pair costs a permute, a shift and one mask-and-or.
struct Field {
  Expr x;
  int64_t k = 0, m = 0;
};
std::optional<Field> field(const Expr& v, const std::map<uint64_t, Expr>& lets) {
  const auto* a = ir::as<ir::Binary>(resolve(v, lets));
  if (!a || a->op != ir::BinOp::bit_and) return std::nullopt;
  const auto* m = ir::as<ir::IntImm>(a->b);
  if (!m || m->value <= 0 || (m->value & (m->value + 1)) != 0) return std::nullopt;
  Field f{a->a, 0, m->value};
  if (const auto* sh = ir::as<ir::Binary>(a->a); sh && sh->op == ir::BinOp::shr) {
    const auto* k = ir::as<ir::IntImm>(sh->b);
    if (!k || k->value < 0 || k->value > 31) return std::nullopt;
    f = {sh->a, k->value, m->value};
  }
  int bits = 0;
  while ((int64_t{1} << bits) <= f.m)
    ++bits;
  if (f.k % 8 + bits > 8 || !is_int(f.x.dtype())) return std::nullopt;
  return f;
}

/// The small integer E - c with E in [0, hi] packs exactly: hi below the magic's base, and every
/// integer on the way (base + c, -c, hi - c) within 2^p of zero, p the type's significand bits.
bool packs_exactly(DType dtype, int64_t hi, int64_t c) {
  const int64_t base = dtype == DType::bf16 ? 128 : 1024, limit = packed_integer_limit(dtype);
  return hi < base && std::llabs(base + c) <= limit && std::llabs(c) <= limit &&
         std::llabs(hi - c) <= limit;
}

} // namespace

int64_t packed_integer_limit(DType dtype) {
  return dtype == DType::bf16 ? 256 : 2048;
}

ir::Stmt packed_products(DType dtype, const Expr& ptr, const std::vector<Expr>& values,
                         const std::map<uint64_t, Expr>& lets) {
  std::vector<Expr> words = packed_words(dtype, values, lets);
  if (words.empty()) return {};
  words.insert(words.begin(), ptr);
  return call("tp::cg::store_words", words);
}

std::vector<Expr> packed_words(DType dtype, const std::vector<Expr>& values,
                               const std::map<uint64_t, Expr>& lets) {
  if ((dtype != DType::bf16 && dtype != DType::f16) || values.size() < 2 || values.size() % 2)
    return {};
  std::vector<Form> forms;
  for (const Expr& v : values) {
    forms.push_back(classify(v, dtype, lets));
    const Form& f = forms.back();
    if (f.kind == Form::none || f.kind != forms[0].kind || f.c != forms[0].c) return {};
    if (f.kind != Form::exact && !packs_exactly(dtype, *known_max(f.e, lets), f.c)) return {};
  }
  const std::string t = dtype == DType::bf16 ? "tp::bf16" : "tp::half";
  std::vector<Expr> args;
  for (size_t h = 0; h < values.size(); h += 2) {
    const Form &lo = forms[h], &hi = forms[h + 1];
    Expr ints, halves;
    const auto fl = lo.kind != Form::exact ? field(lo.e, lets) : std::nullopt;
    const auto fh = lo.kind != Form::exact ? field(hi.e, lets) : std::nullopt;
    if (fl && fh && fl->k == fh->k && fl->m == fh->m)
      ints = call_expr("tp::cg::small_fields2<" + t + ", " + std::to_string(lo.c) + ", " +
                           std::to_string(fl->k) + ", " + std::to_string(fl->m) + ">",
                       {fl->x, fh->x}, DType::i32);
    else if (lo.kind != Form::exact)
      ints = call_expr("tp::cg::small_ints2<" + t + ", " + std::to_string(lo.c) + ">", {lo.e, hi.e},
                       DType::i32);
    if (lo.kind != Form::small_int)
      halves = call_expr("tp::cg::exact2<" + t + ">", {lo.x, hi.x}, DType::i32);
    args.push_back(lo.kind == Form::product
                       ? call_expr("tp::cg::mul2<" + t + ">", {ints, halves}, DType::i32)
                       : (ints.defined() ? ints : halves));
  }
  return args;
}

} // namespace tp::passes
