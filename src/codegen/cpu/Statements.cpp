// Compiled statements: control flow, element stores, allocation, atomics and print.
#include "codegen/cpu/Statements.h"

#include <cmath>
#include <iostream>
#include <mutex>
#include <numeric>
#include <sstream>

namespace tp::cpu {

namespace {

class SeqS : public CStmt {
public:
  std::vector<std::unique_ptr<CStmt>> body;
  void exec(Ctx& c) override {
    for (auto& s : body) s->exec(c);
  }
};

class AllocS : public CStmt {
public:
  AllocS(int slot, ir::Buffer b) : slot_(slot), b_(std::move(b)) {}
  void exec(Ctx& c) override {
    auto& st = c.owned[slot_];
    if (!st) st = std::make_unique<Storage>();
    st->init(b_->name, b_->dtype, b_->const_shape());
    // Poison: a tile's contents are undefined until written.
    double poison = b_->dtype == DType::i32 ? -2147483648.0 : std::nan("");
    std::fill(st->data.begin(), st->data.end(), poison);
    c.buf[slot_] = st.get();
  }

private:
  int slot_;
  ir::Buffer b_;
};

class ForS : public CStmt {
public:
  int slot;
  std::unique_ptr<CExpr> min, extent;
  std::unique_ptr<CStmt> body;
  SourceLoc loc;
  void exec(Ctx& c) override {
    int64_t lo = static_cast<int64_t>(eval_uniform(*min, c, "a loop bound", loc));
    int64_t n = static_cast<int64_t>(eval_uniform(*extent, c, "a loop bound", loc));
    const double* saved = c.lane[slot];
    c.lane[slot] = nullptr;
    for (int64_t i = lo; i < lo + n; ++i) {
      c.scalar[slot] = static_cast<double>(i);
      body->exec(c);
    }
    c.lane[slot] = saved;
  }
};

class LetS : public CStmt {
public:
  int slot;
  std::unique_ptr<CExpr> value;
  std::unique_ptr<CStmt> body;
  SourceLoc loc;
  void exec(Ctx& c) override {
    Val v = value->eval(c);
    const double* saved = c.lane[slot];
    std::vector<double> lanes;
    if (v.uniform) {
      c.scalar[slot] = v.p[0];
      c.lane[slot] = nullptr;
    } else {
      lanes.assign(v.p, v.p + c.n);
      c.lane[slot] = lanes.data();
    }
    body->exec(c);
    c.lane[slot] = saved;
  }
};

class ParallelS : public CStmt {
public:
  std::vector<int> slots;
  std::vector<std::vector<double>> lanes; // per variable, its value in each lane
  int n = 1;
  std::unique_ptr<CStmt> body;
  void exec(Ctx& c) override {
    internal_assert(c.n == 1) << "nested parallel";
    c.n = n;
    for (size_t v = 0; v < slots.size(); ++v) c.lane[slots[v]] = lanes[v].data();
    c.masked = false;
    body->exec(c);
    for (int s : slots) c.lane[s] = nullptr;
    c.n = 1;
    c.masked = false;
  }
};

class IfS : public CStmt {
public:
  std::unique_ptr<CExpr> cond;
  std::unique_ptr<CStmt> then_s, else_s;
  void exec(Ctx& c) override {
    Val k = cond->eval(c);
    if (k.uniform) {
      if (k.p[0] != 0)
        then_s->exec(c);
      else if (else_s)
        else_s->exec(c);
      return;
    }
    std::vector<uint8_t> saved_mask = c.mask;
    bool saved_masked = c.masked;
    std::vector<uint8_t> m(c.n);
    for (int branch = 0; branch < 2; ++branch) {
      CStmt* s = branch == 0 ? then_s.get() : else_s.get();
      if (!s) continue;
      bool any = false;
      for (int i = 0; i < c.n; ++i) {
        bool on = (!saved_masked || saved_mask[i]) && ((k.p[i] != 0) == (branch == 0));
        m[i] = on;
        any |= on;
      }
      if (!any) continue;
      c.mask = m;
      c.masked = true;
      s->exec(c);
    }
    c.mask = std::move(saved_mask);
    c.masked = saved_masked;
  }
};

std::mutex g_atomic_mutex;

class StoreS : public CStmt {
public:
  int slot;
  std::vector<std::unique_ptr<CExpr>> idx;
  std::unique_ptr<CExpr> value;
  bool atomic = false;
  SourceLoc loc;
  void exec(Ctx& c) override {
    Storage& s = *c.buf[slot];
    std::vector<Val> iv;
    bool u = true;
    for (auto& e : idx) {
      iv.push_back(e->eval(c));
      u = u && iv.back().uniform;
    }
    Val v = value->eval(c);
    u = u && v.uniform;
    int64_t ix[ir::kMaxRank];
    // A uniform store inside parallel writes the same element from every lane: the last wins,
    // and they all write the same value.
    int n = u ? 1 : c.n;
    for (int i = 0; i < n; ++i) {
      if (!c.active(i) && !u) continue;
      int64_t off = 0;
      for (size_t d = 0; d < iv.size(); ++d) {
        ix[d] = static_cast<int64_t>(iv[d].at(i));
        off += ix[d] * s.strides[d];
      }
      if (!s.in_bounds(ix)) fail(s, ix);
      if (atomic) {
        std::lock_guard<std::mutex> g(g_atomic_mutex);
        s.data[off] = round_to(s.dtype, s.data[off] + v.at(i));
      } else {
        s.data[off] = round_to(s.dtype, v.at(i));
      }
    }
  }
  [[noreturn]] void fail(const Storage& s, const int64_t* ix) {
    std::ostringstream os, sh;
    for (size_t d = 0; d < s.shape.size(); ++d) {
      os << (d ? ", " : "") << ix[d];
      sh << (d ? ", " : "") << s.shape[d];
    }
    user_error(loc) << "out-of-bounds " << (atomic ? "atomic_add" : "store") << " to '" << s.name
                    << "' at [" << os.str() << "] (shape [" << sh.str()
                    << "]); element accesses must be in bounds: guard them with if_then";
    std::abort();
  }
};

class PrintS : public CStmt {
public:
  std::string label;
  std::unique_ptr<CExpr> value;
  int tile_slot = -1;
  std::ostream* out;
  void exec(Ctx& c) override {
    std::ostringstream os;
    os << label << ": ";
    if (tile_slot >= 0) {
      const Storage& s = *c.buf[tile_slot];
      int64_t cols = s.shape.back();
      for (size_t i = 0; i < s.data.size(); ++i)
        os << s.data[i] << ((static_cast<int64_t>(i) + 1) % cols == 0 ? "\n" : " ");
    } else {
      Val v = value->eval(c);
      os << v.p[0] << "\n";
    }
    static std::mutex m;
    std::lock_guard<std::mutex> g(m);
    *out << os.str();
  }
};

} // namespace

CRegion::CRegion(const ir::Region& r, CompileEnv& env, const SourceLoc& loc)
    : slot(env.lay.buffer(r.buffer)), extent(r.extent) {
  for (const Expr& e : r.min) min.push_back(compile_expr(e, env.lay, loc));
}

std::vector<int64_t> CRegion::origin(Ctx& c, const SourceLoc& loc) const {
  std::vector<int64_t> o;
  for (const auto& e : min) o.push_back(static_cast<int64_t>(eval_uniform(*e, c, "a tile offset", loc)));
  return o;
}

std::unique_ptr<CStmt> compile_stmt(const ir::Stmt& s, CompileEnv& env) {
  Layout& lay = env.lay;
  const SourceLoc& loc = s->loc;
  if (const auto* q = ir::as<ir::Seq>(s)) {
    auto r = std::make_unique<SeqS>();
    for (const ir::Stmt& c : q->stmts) r->body.push_back(compile_stmt(c, env));
    return r;
  }
  if (const auto* a = ir::as<ir::Allocate>(s)) return std::make_unique<AllocS>(lay.buffer(a->buffer), a->buffer);
  if (const auto* f = ir::as<ir::For>(s)) {
    auto r = std::make_unique<ForS>();
    r->slot = lay.var(ir::as<ir::Variable>(f->var)->uid);
    r->min = compile_expr(f->min, lay, loc);
    r->extent = compile_expr(f->extent, lay, loc);
    r->body = compile_stmt(f->body, env);
    r->loc = loc;
    return r;
  }
  if (const auto* p = ir::as<ir::Parallel>(s)) {
    auto r = std::make_unique<ParallelS>();
    int64_t n = 1;
    for (int64_t e : p->extents) n *= e;
    internal_assert(n < (1 << 26)) << "parallel extent too large";
    r->n = static_cast<int>(n);
    for (size_t v = 0; v < p->vars.size(); ++v) {
      r->slots.push_back(lay.var(ir::as<ir::Variable>(p->vars[v])->uid));
      int64_t inner = 1;
      for (size_t w = v + 1; w < p->extents.size(); ++w) inner *= p->extents[w];
      std::vector<double> lane(n);
      for (int64_t i = 0; i < n; ++i) lane[i] = static_cast<double>((i / inner) % p->extents[v]);
      r->lanes.push_back(std::move(lane));
    }
    r->body = compile_stmt(p->body, env);
    return r;
  }
  if (const auto* i = ir::as<ir::IfThenElse>(s)) {
    auto r = std::make_unique<IfS>();
    r->cond = compile_expr(i->cond, lay, loc);
    r->then_s = compile_stmt(i->then_case, env);
    if (i->else_case.defined()) r->else_s = compile_stmt(i->else_case, env);
    return r;
  }
  if (const auto* st = ir::as<ir::Store>(s)) {
    auto r = std::make_unique<StoreS>();
    r->slot = lay.buffer(st->buffer);
    internal_assert(st->indices.size() <= static_cast<size_t>(ir::kMaxRank))
        << "a store to '" << st->buffer->name << "' with " << st->indices.size() << " indices";
    for (const Expr& e : st->indices) r->idx.push_back(compile_expr(e, lay, loc));
    r->value = compile_expr(st->value, lay, loc);
    r->loc = loc;
    return r;
  }
  if (const auto* at = ir::as<ir::AtomicAdd>(s)) {
    auto r = std::make_unique<StoreS>();
    r->slot = lay.buffer(at->buffer);
    internal_assert(at->indices.size() <= static_cast<size_t>(ir::kMaxRank))
        << "an atomic_add to '" << at->buffer->name << "' with " << at->indices.size()
        << " indices";
    for (const Expr& e : at->indices) r->idx.push_back(compile_expr(e, lay, loc));
    r->value = compile_expr(at->value, lay, loc);
    r->atomic = true;
    r->loc = loc;
    return r;
  }
  if (const auto* pr = ir::as<ir::Print>(s)) {
    auto r = std::make_unique<PrintS>();
    r->label = pr->label;
    r->out = env.print_out ? env.print_out : &std::cout;
    if (pr->tile)
      r->tile_slot = lay.buffer(pr->tile);
    else
      r->value = compile_expr(pr->value, lay, loc);
    return r;
  }
  if (const auto* lt = ir::as<ir::Let>(s)) {
    auto r = std::make_unique<LetS>();
    r->slot = lay.var(ir::as<ir::Variable>(lt->var)->uid);
    r->value = compile_expr(lt->value, lay, loc);
    r->body = compile_stmt(lt->body, env);
    r->loc = loc;
    return r;
  }
  if (const auto* c = ir::as<ir::Copy>(s)) return compile_copy(c, env);
  if (const auto* g = ir::as<ir::Gemm>(s)) return compile_gemm(g, env);
  if (const auto* f = ir::as<ir::Fill>(s)) return compile_fill(f, env);
  if (const auto* r = ir::as<ir::Reduce>(s)) return compile_reduce(r, env);
  internal_assert(false) << "cannot interpret " << ir::node_kind_name(s->kind);
  return nullptr;
}

} // namespace tp::cpu
