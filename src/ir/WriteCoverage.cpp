// Coverage of a tile by the statements that write it, from their form.
#include "ir/WriteCoverage.h"

#include <map>
#include <optional>
#include <set>

namespace tp::ir {

namespace {

/// One dimension's index `v * m + c`, with v a variable (uid) or none (a constant index).
struct Affine {
  uint64_t var = 0; // 0: no variable
  int64_t m = 1, c = 0;
};

std::optional<Affine> affine(const Expr& e) {
  if (const int64_t* v = e.as_int()) return Affine{0, 1, *v};
  if (const auto* x = as<Variable>(e)) return Affine{x->uid, 1, 0};
  const auto* b = as<Binary>(e);
  if (!b) return std::nullopt;
  if (b->op == BinOp::mul) {
    const auto* x = as<Variable>(b->a);
    const int64_t* m = b->b.as_int();
    if (!x || !m) {
      x = as<Variable>(b->b);
      m = b->a.as_int();
    }
    if (x && m && *m >= 1) return Affine{x->uid, *m, 0};
    return std::nullopt;
  }
  if (b->op == BinOp::add) {
    auto l = affine(b->a), r = affine(b->b);
    if (!l || !r) return std::nullopt;
    if (r->var == 0 && l->c == 0) return Affine{l->var, l->m, r->c};
    if (l->var == 0 && r->c == 0) return Affine{r->var, r->m, l->c};
  }
  return std::nullopt;
}

bool region_covers(const Region& r, const std::vector<int64_t>& shape) {
  if (r.min.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t* lo = r.min[d].as_int();
    if (!lo || *lo > 0 || *lo + r.extent[d] < shape[d]) return false;
  }
  return true;
}

/// The unconditional stores to `b` at the top of a parallel body (through sequences and lets).
void top_stores(const Stmt& s, uint64_t uid, std::vector<const Store*>& out) {
  if (const auto* q = as<Seq>(s)) {
    for (const Stmt& x : q->stmts)
      top_stores(x, uid, out);
  } else if (const auto* l = as<Let>(s)) {
    if (l->body.defined()) top_stores(l->body, uid, out);
  } else if (const auto* st = as<Store>(s); st && st->buffer->uid == uid) {
    out.push_back(st);
  }
}

bool parallel_covers(const Parallel* p, const Buffer& b, const std::vector<int64_t>& shape) {
  std::map<uint64_t, int64_t> extent;
  for (size_t i = 0; i < p->vars.size(); ++i)
    extent[as<Variable>(p->vars[i])->uid] = p->extents[i];
  std::vector<const Store*> stores;
  top_stores(p->body, b->uid, stores);
  if (stores.empty()) return false;
  const size_t rank = shape.size();
  std::vector<Affine> dims(rank); // each dimension's variable and step, as the first store has
  std::set<std::vector<int64_t>> offsets;
  for (const Store* st : stores) {
    if (st->indices.size() != rank) return false;
    std::vector<int64_t> c(rank);
    std::set<uint64_t> used;
    for (size_t d = 0; d < rank; ++d) {
      auto a = affine(st->indices[d]);
      if (!a || a->c < 0 || a->c >= a->m) {
        // A constant index covers its dimension only when the dimension is that one element.
        if (!(a && a->var == 0 && a->c == 0 && shape[d] == 1)) return false;
        a = Affine{0, 1, 0};
      }
      if (a->var != 0 && (!extent.count(a->var) || !used.insert(a->var).second)) return false;
      if (st == stores.front()) {
        dims[d] = *a;
        const int64_t n = a->var ? extent.at(a->var) * a->m : 1;
        if (n != shape[d]) return false;
      } else if (a->var != dims[d].var || a->m != dims[d].m) {
        return false;
      }
      c[d] = a->c;
    }
    offsets.insert(c);
  }
  int64_t cells = 1;
  for (const Affine& a : dims)
    cells *= a.m;
  return static_cast<int64_t>(offsets.size()) == cells;
}

} // namespace

bool writes_every_element(const std::vector<Stmt>& stmts, const Buffer& b) {
  const std::vector<int64_t> shape = b->const_shape();
  for (const Stmt& s : stmts) {
    if (const auto* f = as<Fill>(s); f && f->dst.buffer->uid == b->uid)
      if (region_covers(f->dst, shape)) return true;
    if (const auto* c = as<Copy>(s); c && c->dst.buffer->uid == b->uid)
      if (region_covers(c->dst, shape)) return true;
    if (const auto* p = as<Parallel>(s); p && parallel_covers(p, b, shape)) return true;
  }
  return false;
}

} // namespace tp::ir
