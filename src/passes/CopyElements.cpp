// See CopyElements.h.
#include "passes/CopyElements.h"

#include <algorithm>

#include "ir/CopyShape.h"
#include "passes/LowerTileOps.h"

namespace tp::passes {

using ir::Scope;

std::vector<int> nonunit(const std::vector<int64_t>& ext) {
  std::vector<int> d;
  for (size_t i = 0; i < ext.size(); ++i)
    if (ext[i] != 1) d.push_back(static_cast<int>(i));
  return d;
}

std::vector<Expr> place(const LowerContext& cx, const ir::Region& r, const std::vector<Expr>& c) {
  std::vector<int> nu = nonunit(r.extent);
  internal_assert(nu.size() == c.size()) << "copy coordinates do not match the box";
  std::vector<Expr> idx;
  size_t k = 0;
  for (size_t d = 0; d < r.extent.size(); ++d) {
    Expr m = lower_expr(cx, r.min[d]);
    idx.push_back(r.extent[d] == 1 ? m : m + c[k++]);
  }
  return idx;
}

std::vector<Expr> onto(const ir::Region& r, const std::vector<Expr>& c,
                       const std::vector<int64_t>& from) {
  internal_assert(c.size() == from.size()) << "copy coordinates do not match their extents";
  return ir::regroup(c, from, r.squeezed());
}

Expr read(const LowerContext& cx, const ir::Region& r, const std::vector<Expr>& c) {
  std::vector<Expr> idx = place(cx, r, c);
  Expr v = cx.load(r.buffer, idx);
  if (r.buffer->scope == Scope::global) {
    // The zero must have the element's kind: a float 0.0 would turn an integer copy into a
    // float one, rounding every word above 2^24.
    Expr zero = is_float(r.buffer->dtype) ? Expr(0.0) : Expr(0);
    v = ir::Select::make(cx.global_in_bounds(r.buffer, idx), v, zero);
  }
  return v;
}

ir::Stmt write(const LowerContext& cx, const ir::Region& r, const std::vector<Expr>& c,
               const Expr& v) {
  std::vector<Expr> idx = place(cx, r, c);
  ir::Stmt s = cx.store(r.buffer, idx, v);
  if (r.buffer->scope == Scope::global) s = if_then(cx.global_in_bounds(r.buffer, idx), s);
  return s;
}

Expr read_slack(const LowerContext& cx, const ir::Region& g, const std::vector<Expr>& idx_end) {
  const ir::Buffer& b = g.buffer;
  std::vector<Expr> along = idx_end;
  along.back() = along.back() + (16 / dtype_bytes(b->dtype) - 1);
  Expr slack = cx.global_in_bounds(b, along);
  if (idx_end.size() >= 2) {
    std::vector<Expr> next = idx_end;
    next[next.size() - 2] = next[next.size() - 2] + 1;
    next.back() = Expr(0);
    slack = slack || cx.global_in_bounds(b, next);
  }
  return slack;
}

bool row_lanes_allowed(const LowerContext& cx, bool load) {
  auto it = cx.k.attrs.find("row_lanes");
  // Off unless asked: measured on no GPU yet (docs/perf-log.md, 2026-12-07, twelfth session).
  const int bits = it == cx.k.attrs.end() ? 0 : std::stoi(it->second); // checked by annotate()
  return (bits & (load ? 1 : 2)) != 0;
}

void copy_note(LowerContext& cx, const ir::Copy* op, const std::string& what) {
  const std::string n = "copy" + (op->loc.known() ? " at " + op->loc.str() : "") + ": " + what;
  if (std::find(cx.write_notes.begin(), cx.write_notes.end(), n) == cx.write_notes.end())
    cx.write_notes.push_back(n);
}

} // namespace tp::passes
