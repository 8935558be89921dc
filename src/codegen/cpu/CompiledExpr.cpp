// Compiled expressions of the CPU interpreter: one evaluator class per IR expression kind,
// vectorised over the lanes of a parallel loop.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "codegen/cpu/Machine.h"

namespace tp::cpu {

void Storage::init(const std::string& n, DType t, std::vector<int64_t> s) {
  name = n;
  dtype = t;
  shape = std::move(s);
  strides.assign(shape.size(), 1);
  int64_t total = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = total;
    total *= shape[d];
  }
  data.assign(static_cast<size_t>(total), 0.0);
}

bool Storage::in_bounds(const int64_t* idx) const {
  for (size_t d = 0; d < shape.size(); ++d)
    if (idx[d] < 0 || idx[d] >= shape[d]) return false;
  return true;
}

int Layout::var(uint64_t uid) {
  auto it = var_slot.find(uid);
  if (it != var_slot.end()) return it->second;
  int s = static_cast<int>(var_slot.size());
  var_slot[uid] = s;
  return s;
}

int Layout::buffer(const ir::Buffer& b) {
  auto it = buf_slot.find(b->uid);
  if (it != buf_slot.end()) return it->second;
  int s = static_cast<int>(buffers.size());
  buf_slot[b->uid] = s;
  buffers.push_back(b);
  return s;
}

double eval_uniform(CExpr& e, Ctx& c, const char* what, const SourceLoc& loc) {
  Val v = e.eval(c);
  if (!v.uniform) {
    for (int i = 1; i < c.n; ++i)
      if (c.active(i) && v.p[i] != v.p[0])
        user_error(loc) << what << " differs between iterations of the enclosing parallel; "
                        << "it must be the same for every element";
  }
  return v.p[0];
}

namespace {

using ir::BinOp;
using ir::CallOp;

double rnd(DType t, double v) {
  return t == DType::f32 ? static_cast<double>(static_cast<float>(v)) : v;
}

class ConstE : public CExpr {
public:
  explicit ConstE(double v) : v_(v) {}
  Val eval(Ctx&) override { return {&v_, true}; }

private:
  double v_;
};

class VarE : public CExpr {
public:
  explicit VarE(int slot) : slot_(slot) {}
  Val eval(Ctx& c) override {
    if (const double* l = c.lane[slot_]) return {l, false};
    return {&c.scalar[slot_], true};
  }

private:
  int slot_;
};

double binop(BinOp op, bool fl, double x, double y) {
  switch (op) {
  case BinOp::add:
    return x + y;
  case BinOp::sub:
    return x - y;
  case BinOp::mul:
    return x * y;
  case BinOp::div:
    if (fl) return x / y;
    return y == 0 ? 0 : std::trunc(x / y);
  case BinOp::mod:
    if (fl) return std::fmod(x, y);
    return y == 0 ? 0 : std::fmod(x, y);
  case BinOp::min:
    return std::fmin(x, y);
  case BinOp::max:
    return std::fmax(x, y);
  case BinOp::bit_and:
  case BinOp::bit_xor:
  case BinOp::bit_or:
  case BinOp::shl:
  case BinOp::shr:
    return static_cast<double>(ir::bit_op32(op, static_cast<int64_t>(x), static_cast<int64_t>(y)));
  case BinOp::eq:
    return x == y;
  case BinOp::ne:
    return x != y;
  case BinOp::lt:
    return x < y;
  case BinOp::le:
    return x <= y;
  case BinOp::gt:
    return x > y;
  case BinOp::ge:
    return x >= y;
  case BinOp::land:
    return (x != 0) && (y != 0);
  case BinOp::lor:
    return (x != 0) || (y != 0);
  }
  return 0;
}

class BinE : public CExpr {
public:
  BinE(BinOp op, bool fl, std::unique_ptr<CExpr> a, std::unique_ptr<CExpr> b)
      : op_(op), fl_(fl), a_(std::move(a)), b_(std::move(b)) {}
  Val eval(Ctx& c) override {
    Val x = a_->eval(c), y = b_->eval(c);
    bool u = x.uniform && y.uniform;
    double* o = out(c, u);
    int n = u ? 1 : c.n;
    // The common cases get tight loops; the switch stays outside them.
    if (op_ == BinOp::add && fl_) {
      for (int i = 0; i < n; ++i)
        o[i] = rnd(type, x.at(i) + y.at(i));
    } else if (op_ == BinOp::mul && fl_) {
      for (int i = 0; i < n; ++i)
        o[i] = rnd(type, x.at(i) * y.at(i));
    } else {
      for (int i = 0; i < n; ++i)
        o[i] = rnd(type, binop(op_, fl_, x.at(i), y.at(i)));
    }
    return {o, u};
  }

private:
  BinOp op_;
  bool fl_;
  std::unique_ptr<CExpr> a_, b_;
};

double callop(CallOp op, double x, double y) {
  switch (op) {
  case CallOp::neg:
    return -x;
  case CallOp::lnot:
    return x == 0;
  case CallOp::abs:
    return std::fabs(x);
  case CallOp::exp:
    return std::exp(x);
  case CallOp::exp2:
    return std::exp2(x);
  case CallOp::log:
    return std::log(x);
  case CallOp::log2:
    return std::log2(x);
  case CallOp::sqrt:
    return std::sqrt(x);
  case CallOp::rsqrt:
    return 1.0 / std::sqrt(x);
  case CallOp::bit_not:
    return static_cast<double>(~static_cast<int32_t>(static_cast<int64_t>(x)));
  case CallOp::tanh:
    return std::tanh(x);
  case CallOp::erf:
    return std::erf(x);
  case CallOp::sigmoid:
    return 1.0 / (1.0 + std::exp(-x));
  case CallOp::pow:
    return std::pow(x, y);
  case CallOp::bits_to_f32: {
    const auto bits = static_cast<int32_t>(static_cast<int64_t>(x));
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  case CallOp::f32_to_bits: {
    const auto f = static_cast<float>(x);
    int32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits;
  }
  }
  return 0;
}

/// A math call of one or two arguments (the second is unused, and 0, for one).
class CallE : public CExpr {
public:
  CallE(CallOp op, std::unique_ptr<CExpr> a, std::unique_ptr<CExpr> b)
      : op_(op), a_(std::move(a)), b_(std::move(b)) {}
  Val eval(Ctx& c) override {
    Val x = a_->eval(c);
    static const double zero = 0;
    Val y = b_ ? b_->eval(c) : Val{&zero, true};
    bool u = x.uniform && y.uniform;
    double* o = out(c, u);
    int n = u ? 1 : c.n;
    for (int i = 0; i < n; ++i)
      o[i] = rnd(type, callop(op_, x.at(i), y.at(i)));
    return {o, u};
  }

private:
  CallOp op_;
  std::unique_ptr<CExpr> a_, b_;
};

class SelectE : public CExpr {
public:
  SelectE(std::unique_ptr<CExpr> c, std::unique_ptr<CExpr> a, std::unique_ptr<CExpr> b,
          bool a_loads, bool b_loads)
      : c_(std::move(c)), a_(std::move(a)), b_(std::move(b)), loads_{a_loads, b_loads} {}
  // Lazy, like ?: on the GPU: only the chosen side is evaluated, per lane; each side runs with
  // the lanes that chose it active, so a load on the side not chosen is never performed.
  Val eval(Ctx& ctx) override {
    Val k = c_->eval(ctx);
    if (k.uniform) return k.p[0] != 0 ? a_->eval(ctx) : b_->eval(ctx);
    std::vector<uint8_t> saved_mask = ctx.mask;
    const bool saved_masked = ctx.masked;
    Val side[2] = {{nullptr, true}, {nullptr, true}};
    for (int s = 0; s < 2; ++s) {
      // A side without loads cannot fail or differ: evaluate it for every lane, unmasked.
      if (!loads_[s]) {
        side[s] = (s == 0 ? a_ : b_)->eval(ctx);
        continue;
      }
      std::vector<uint8_t> m(ctx.n);
      bool any = false;
      for (int i = 0; i < ctx.n; ++i) {
        m[i] = (!saved_masked || saved_mask[i]) && ((k.p[i] != 0) == (s == 0));
        any |= m[i] != 0;
      }
      if (!any) continue;
      ctx.mask = std::move(m);
      ctx.masked = true;
      side[s] = (s == 0 ? a_ : b_)->eval(ctx);
    }
    ctx.mask = std::move(saved_mask);
    ctx.masked = saved_masked;
    double* o = out(ctx, false);
    for (int i = 0; i < ctx.n; ++i) {
      const Val& v = side[k.p[i] != 0 ? 0 : 1];
      o[i] = v.p ? v.at(i) : 0.0;
    }
    return {o, false};
  }

private:
  std::unique_ptr<CExpr> c_, a_, b_;
  bool loads_[2];
};

/// Does e read a buffer (the only expression that can fail on the interpreter)?
bool has_load(const Expr& e) {
  if (ir::as<ir::Load>(e)) return true;
  if (const auto* b = ir::as<ir::Binary>(e)) return has_load(b->a) || has_load(b->b);
  if (const auto* c = ir::as<ir::Call>(e))
    return std::any_of(c->args.begin(), c->args.end(), [](const Expr& a) { return has_load(a); });
  if (const auto* s = ir::as<ir::Select>(e))
    return has_load(s->cond) || has_load(s->a) || has_load(s->b);
  if (const auto* k = ir::as<ir::Cast>(e)) return has_load(k->value);
  return !ir::as<ir::IntImm>(e) && !ir::as<ir::FloatImm>(e) && !ir::as<ir::Variable>(e);
}

class CastE : public CExpr {
public:
  explicit CastE(std::unique_ptr<CExpr> a) : a_(std::move(a)) {}
  Val eval(Ctx& c) override {
    Val x = a_->eval(c);
    double* o = out(c, x.uniform);
    int n = x.uniform ? 1 : c.n;
    for (int i = 0; i < n; ++i)
      o[i] = round_to(type, x.at(i));
    return {o, x.uniform};
  }

private:
  std::unique_ptr<CExpr> a_;
};

class LoadE : public CExpr {
public:
  LoadE(int slot, std::vector<std::unique_ptr<CExpr>> idx, SourceLoc loc)
      : slot_(slot), idx_(std::move(idx)), loc_(std::move(loc)) {}
  Val eval(Ctx& c) override {
    Storage& s = *c.buf[slot_];
    std::vector<Val> iv;
    bool u = true;
    for (auto& e : idx_) {
      iv.push_back(e->eval(c));
      u = u && iv.back().uniform;
    }
    double* o = out(c, u);
    int n = u ? 1 : c.n;
    // A uniform load under a mask with no active lane (the side of a select no lane chose)
    // is not performed.
    if (u && c.masked &&
        std::none_of(c.mask.begin(), c.mask.begin() + c.n, [](uint8_t m) { return m; })) {
      o[0] = 0;
      return {o, u};
    }
    int64_t idx[ir::kMaxRank];
    for (int i = 0; i < n; ++i) {
      if (!u && !c.active(i)) {
        o[i] = 0;
        continue;
      }
      int64_t off = 0;
      for (size_t d = 0; d < iv.size(); ++d) {
        idx[d] = static_cast<int64_t>(iv[d].at(i));
        off += idx[d] * s.strides[d];
      }
      if (!s.in_bounds(idx)) fail(s, idx);
      o[i] = s.data[off];
    }
    return {o, u};
  }

private:
  [[noreturn]] void fail(const Storage& s, const int64_t* idx) {
    std::ostringstream os;
    for (size_t d = 0; d < s.shape.size(); ++d)
      os << (d ? ", " : "") << idx[d];
    std::ostringstream sh;
    for (size_t d = 0; d < s.shape.size(); ++d)
      sh << (d ? ", " : "") << s.shape[d];
    user_error(loc_) << "out-of-bounds read of '" << s.name << "' at [" << os.str() << "] (shape ["
                     << sh.str()
                     << "]); element accesses must be in bounds: guard them with if_then";
    std::abort();
  }
  int slot_;
  std::vector<std::unique_ptr<CExpr>> idx_;
  SourceLoc loc_;
};

} // namespace

std::unique_ptr<CExpr> compile_expr(const Expr& e, Layout& lay, const SourceLoc& loc) {
  internal_assert(e.defined()) << "undefined expression";
  std::unique_ptr<CExpr> r;
  if (const auto* i = ir::as<ir::IntImm>(e)) {
    r = std::make_unique<ConstE>(static_cast<double>(i->value));
  } else if (const auto* f = ir::as<ir::FloatImm>(e)) {
    r = std::make_unique<ConstE>(round_to(f->dtype, f->value));
  } else if (const auto* v = ir::as<ir::Variable>(e)) {
    r = std::make_unique<VarE>(lay.var(v->uid));
  } else if (const auto* b = ir::as<ir::Binary>(e)) {
    bool fl = is_float(ir::compute_type(b->a.dtype())) || is_float(ir::compute_type(b->b.dtype()));
    r = std::make_unique<BinE>(b->op, fl, compile_expr(b->a, lay, loc),
                               compile_expr(b->b, lay, loc));
  } else if (const auto* c = ir::as<ir::Call>(e)) {
    r = std::make_unique<CallE>(c->op, compile_expr(c->args[0], lay, loc),
                                c->args.size() > 1 ? compile_expr(c->args[1], lay, loc) : nullptr);
  } else if (const auto* s = ir::as<ir::Select>(e)) {
    r = std::make_unique<SelectE>(compile_expr(s->cond, lay, loc), compile_expr(s->a, lay, loc),
                                  compile_expr(s->b, lay, loc), has_load(s->a), has_load(s->b));
  } else if (const auto* k = ir::as<ir::Cast>(e)) {
    r = std::make_unique<CastE>(compile_expr(k->value, lay, loc));
  } else if (const auto* l = ir::as<ir::Load>(e)) {
    std::vector<std::unique_ptr<CExpr>> idx;
    for (const Expr& x : l->indices)
      idx.push_back(compile_expr(x, lay, loc));
    internal_assert(idx.size() <= static_cast<size_t>(ir::kMaxRank))
        << "a load of '" << l->buffer->name << "' with " << idx.size() << " indices";
    r = std::make_unique<LoadE>(lay.buffer(l->buffer), std::move(idx), loc);
  } else {
    internal_assert(false) << "cannot interpret " << ir::node_kind_name(e->kind);
  }
  r->id = lay.num_exprs++;
  r->type = e.dtype() == DType::boolean ? DType::i32 : ir::compute_type(e.dtype());
  if (ir::as<ir::Cast>(e)) r->type = e.dtype();
  return r;
}

} // namespace tp::cpu
