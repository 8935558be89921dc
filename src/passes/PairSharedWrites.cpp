#include "passes/PairSharedWrites.h"

#include <set>

#include "ir/IRVisitor.h"
#include "passes/BufferAccesses.h"
#include "passes/PackedProducts.h"

namespace tp::passes {

namespace {

/// The widest run a thread writes: 8 16-bit elements, one 16-byte store.
constexpr int kMaxWidth = 8;

bool mentions(const Expr& e, uint64_t var) {
  VarUses uses;
  uses.visit(e);
  return uses.uids.count(var) > 0;
}

/// Why the loop's body is not lets and stores into 16-bit shared tiles at column `j` ("" when
/// it is). Collects the tiles written.
std::string check_body(const LowerContext& cx, const ir::Stmt& s, uint64_t j,
                       std::map<uint64_t, ir::Buffer>& written) {
  if (!s.defined()) return "";
  if (const auto* l = ir::as<ir::Let>(s)) return check_body(cx, l->body, j, written);
  if (const auto* q = ir::as<ir::Seq>(s)) {
    for (const ir::Stmt& x : q->stmts)
      if (std::string why = check_body(cx, x, j, written); !why.empty()) return why;
    return "";
  }
  const auto* st = ir::as<ir::Store>(s);
  if (!st)
    return std::string("the body has statements other than lets and element stores (") +
           ir::node_kind_name(s->kind) + ")";
  const ir::Buffer& b = st->buffer;
  if (!cx.layouts.in_shared(b)) return "it writes '" + b->name + "', which is not a shared tile";
  if (b->dtype != DType::bf16 && b->dtype != DType::f16)
    return "shared tile '" + b->name + "' holds " + dtype_name(b->dtype) + ", not bf16 or f16";
  const auto* last = ir::as<ir::Variable>(st->indices.back());
  if (!last || last->uid != j)
    return "the column of its store into '" + b->name + "' is not the loop's innermost variable";
  for (size_t d = 0; d + 1 < st->indices.size(); ++d)
    if (mentions(st->indices[d], j))
      return "a row index of its store into '" + b->name + "' uses the innermost variable";
  written[b->uid] = b;
  return "";
}

/// The widest run of adjacent columns (8, 4 or 2; 0: none) a thread can write at once into every
/// tile in `written`, for an innermost extent `extent`: runs start at multiples of their width,
/// so they stay adjacent and aligned to their size when the tile's row pitch is a multiple of
/// the width (linear), or the width divides the 16-byte chunks a swizzle moves whole (8 16-bit
/// elements). Tiles start 1024-byte aligned (PlanSharedMemory).
int run_width(const LowerContext& cx, const std::map<uint64_t, ir::Buffer>& written,
              int64_t extent) {
  for (int w = kMaxWidth; w >= 2; w /= 2) {
    bool ok = extent % w == 0;
    for (const auto& [uid, b] : written) {
      const SharedLayout& sl = cx.layouts.shared_layout(b);
      ok = ok && (sl.kind == SharedLayout::Kind::linear ? (sl.cols + sl.pad) % w == 0
                                                        : sl.cols % w == 0 && 8 % w == 0);
    }
    if (ok) return w;
  }
  return 0;
}

/// The body for column W jj + h: the innermost variable replaced, and (h > 0) each let given a
/// fresh variable, so that every column's lets can stand in one scope.
ir::Stmt instantiate(const ir::Stmt& s, std::map<uint64_t, Expr>& m, int h) {
  if (!s.defined()) return s;
  if (const auto* l = ir::as<ir::Let>(s)) {
    Var v = l->var;
    if (h > 0) {
      const auto* node = ir::as<ir::Variable>(l->var);
      Var fresh(node->name + "_" + std::to_string(h), l->value.dtype());
      m[node->uid] = fresh;
      v = fresh;
    }
    Expr value = substitute(l->value, m);
    return ir::Let::make(v, value, instantiate(l->body, m, h), l->loc);
  }
  if (const auto* q = ir::as<ir::Seq>(s)) {
    std::vector<ir::Stmt> out;
    for (const ir::Stmt& x : q->stmts)
      out.push_back(instantiate(x, m, h));
    return ir::Seq::make(out, q->loc);
  }
  return substitute(s, m);
}

/// A lowered body taken apart: its lets in order and its shared stores in order.
struct Flat {
  std::vector<std::pair<Var, Expr>> lets;
  std::vector<const ir::Store*> stores;
};
bool flatten(const ir::Stmt& s, Flat& out) {
  if (!s.defined()) return true;
  if (const auto* l = ir::as<ir::Let>(s)) {
    out.lets.emplace_back(l->var, l->value);
    return flatten(l->body, out);
  }
  if (const auto* q = ir::as<ir::Seq>(s)) {
    for (const ir::Stmt& x : q->stmts)
      if (!flatten(x, out)) return false;
    return true;
  }
  const auto* st = ir::as<ir::Store>(s);
  if (!st || st->indices.size() != 1) return false;
  out.stores.push_back(st);
  return true;
}

/// Whether a let's value reads W adjacent columns of a shared tile across the W columns a thread
/// takes, as one vector load can (tp::cg::lds_vec): a load, or its cast to f32, of a shared
/// tile whose last index is exactly the innermost variable `j` and whose other indices do not
/// use it, in a layout where runs of W start aligned to their size and stay in one row (a linear
/// row pitch that is a multiple of W; a swizzle only when a run fits its 16-byte chunk).
bool reads_a_run(const LowerContext& cx, const Expr& value, uint64_t j, int W) {
  Expr v = value;
  if (const auto* c = ir::as<ir::Cast>(v); c && c->dtype == DType::f32) v = c->value;
  const auto* l = ir::as<ir::Load>(v);
  if (!l || !cx.layouts.in_shared(l->buffer)) return false;
  const auto* last = ir::as<ir::Variable>(l->indices.back());
  if (!last || last->uid != j) return false;
  for (size_t d = 0; d + 1 < l->indices.size(); ++d)
    if (mentions(l->indices[d], j)) return false;
  const SharedLayout& sl = cx.layouts.shared_layout(l->buffer);
  const int bytes = W * dtype_bytes(l->buffer->dtype);
  if (bytes < 4) return false;
  return sl.kind == SharedLayout::Kind::linear ? (sl.cols + sl.pad) % W == 0
                                               : sl.cols % W == 0 && bytes <= 16;
}

/// For each let of the body, in the order flatten() meets them: reads_a_run.
void run_lets(const LowerContext& cx, const ir::Stmt& s, uint64_t j, int W,
              std::vector<bool>& out) {
  if (!s.defined()) return;
  if (const auto* l = ir::as<ir::Let>(s)) {
    out.push_back(reads_a_run(cx, l->value, j, W));
    run_lets(cx, l->body, j, W, out);
  } else if (const auto* q = ir::as<ir::Seq>(s)) {
    for (const ir::Stmt& x : q->stmts)
      run_lets(cx, x, j, W, out);
  }
}

/// The lowered load inside a let's value (a load, or its cast to f32).
const ir::Load* lowered_load(const Expr& value) {
  Expr v = value;
  if (const auto* c = ir::as<ir::Cast>(v)) v = c->value;
  return ir::as<ir::Load>(v);
}

/// A store's value without the conversion to the tile's type (the paired store rounds the same
/// way), or undefined when it is not an f32 value.
Expr f32_value(const ir::Store* st) {
  Expr v = st->value;
  if (const auto* c = ir::as<ir::Cast>(v); c && c->dtype == st->buffer->dtype) v = c->value;
  return v.dtype() == DType::f32 ? v : Expr();
}

} // namespace

ir::Stmt pair_shared_writes(LowerContext& cx, const ir::Parallel* p,
                            const std::function<ir::Stmt(const ir::Stmt&)>& lower) {
  const uint64_t j = ir::as<ir::Variable>(p->vars.back())->uid;
  bool writes_shared = false;
  ir::for_each_stmt(p->body, [&](const ir::Stmt& s) {
    if (const auto* st = ir::as<ir::Store>(s))
      writes_shared = writes_shared || cx.layouts.in_shared(st->buffer);
  });
  if (!writes_shared) return {};
  const std::string where = "parallel loop" + (p->loc.known() ? " at " + p->loc.str() : "");
  auto refuse = [&](const std::string& why) {
    cx.write_notes.push_back(where + ": shared writes, not paired: " + why);
    return ir::Stmt();
  };
  std::map<uint64_t, ir::Buffer> written;
  if (std::string why = check_body(cx, p->body, j, written); !why.empty()) return refuse(why);
  const std::set<uint64_t> reads = buffer_accesses(p->body).reads;
  for (const auto& [uid, b] : written)
    if (reads.count(uid)) return refuse("it reads shared tile '" + b->name + "', which it writes");
  const int W = run_width(cx, written, p->extents.back());
  if (W == 0) return refuse("its innermost extent or a tile's row is an odd number of elements");
  // Each column's body, lowered; Flat points into them, so they live to the end.
  Var jj("jj");
  std::vector<ir::Stmt> lowered(W);
  std::vector<Flat> cols(W);
  for (int h = 0; h < W; ++h) {
    std::map<uint64_t, Expr> m{{j, jj * W + h}};
    lowered[h] = lower(instantiate(p->body, m, h));
    if (!flatten(lowered[h], cols[h]) || cols[h].stores.size() != cols[0].stores.size())
      return refuse("its lowered body is not lets and element stores");
  }
  // Every column's let values, which the packed form looks through.
  std::map<uint64_t, Expr> let_values;
  for (const Flat& c : cols)
    for (const auto& [var, value] : c.lets)
      let_values[ir::as<ir::Variable>(var)->uid] = value;
  std::vector<ir::Stmt> runs;
  int packed = 0;
  for (size_t k = 0; k < cols[0].stores.size(); ++k) {
    const ir::Store* first = cols[0].stores[k];
    const Expr ptr = call_expr("tp.ptr", {first->indices[0]}, DType::i32, {first->buffer});
    std::vector<Expr> values;
    for (int h = 0; h < W; ++h) {
      values.push_back(f32_value(cols[h].stores[k]));
      if (!values.back().defined()) return refuse("a stored value is not f32");
    }
    if (ir::Stmt p = packed_products(first->buffer->dtype, ptr, values, let_values); p.defined()) {
      runs.push_back(p);
      ++packed;
      continue;
    }
    values.insert(values.begin(), ptr);
    runs.push_back(call("tp::cg::store" + std::to_string(W) + "_aligned", values));
  }
  // Lets that read a run of a shared tile take it with one vector load into a local array,
  // placed where column 0's let was; every column's let then reads its element.
  std::vector<bool> vec;
  run_lets(cx, p->body, j, W, vec);
  std::vector<ir::Buffer> arrays(vec.size());
  int vector_loads = 0;
  for (size_t k = 0; k < vec.size() && k < cols[0].lets.size(); ++k) {
    const ir::Load* l = vec[k] ? lowered_load(cols[0].lets[k].second) : nullptr;
    if (!l || l->indices.size() != 1) continue;
    const auto* name = ir::as<ir::Variable>(cols[0].lets[k].first);
    arrays[k] = ir::make_buffer(name->name + "_run", ir::Scope::local,
                                cols[0].lets[k].second.dtype(), {Expr(W)}, 0, p->loc);
    ++vector_loads;
  }
  ir::Stmt body = ir::Seq::make(runs);
  for (int h = W - 1; h >= 0; --h)
    for (size_t k = cols[h].lets.size(); k-- > 0;) {
      const auto& [var, value] = cols[h].lets[k];
      if (k >= arrays.size() || !arrays[k]) {
        body = ir::Let::make(var, value, body);
        continue;
      }
      body = ir::Let::make(var, ir::Load::make(arrays[k], {Expr(h)}), body);
      if (h == 0) {
        const ir::Load* l = lowered_load(value);
        ir::Stmt load = call("tp::cg::lds_vec<" + std::to_string(W) + ">",
                             {call_expr("tp.ptr", {Expr(0)}, DType::i32, {arrays[k]}),
                              call_expr("tp.ptr", {l->indices[0]}, DType::i32, {l->buffer})});
        body = seq({ir::Allocate::make(arrays[k], {}), load, body});
      }
    }
  cx.write_notes.push_back(
      where + ": shared writes paired (" + std::to_string(W) + " adjacent columns a thread, one " +
      std::to_string(2 * W) + "-byte store a run" +
      (vector_loads ? ", " + std::to_string(vector_loads) + " shared read(s) as vector loads"
                    : "") +
      (packed ? ", " + std::to_string(packed) + " of " + std::to_string(runs.size()) +
                    " run(s) computed as packed 16-bit products"
              : "") +
      ")");
  std::vector<Var> vars = p->vars;
  std::vector<int64_t> ext = p->extents;
  vars.back() = jj;
  ext.back() /= W;
  return index_space_for(cx, vars, ext, false, body);
}

} // namespace tp::passes
