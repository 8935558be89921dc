// Layout inference: gemm anchors, then propagation through parallel loops, fragment copies and
// reductions until nothing changes.
#include "passes/InferLayouts.h"

#include <set>

#include <sstream>

#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

const char* gemm_kind_name(GemmKind k) {
  switch (k) {
  case GemmKind::wgmma_ss: return "wgmma_ss";
  case GemmKind::wgmma_rs: return "wgmma_rs";
  case GemmKind::mma: return "mma";
  case GemmKind::mma_rs: return "mma_rs";
  case GemmKind::simt: return "simt";
  }
  return "?";
}

bool LayoutInfo::in_shared(const Buffer& b) const {
  return b->scope == Scope::shared || promoted.count(b->uid) > 0;
}

const FragmentLayout& LayoutInfo::fragment(const Buffer& b) const {
  auto it = fragments.find(b->uid);
  internal_assert(it != fragments.end()) << "fragment " << b->name << " has no register layout";
  return it->second;
}

const SharedLayout& LayoutInfo::shared_layout(const Buffer& b) const {
  auto it = shared.find(b->uid);
  internal_assert(it != shared.end()) << "buffer " << b->name << " has no shared layout";
  return it->second;
}

namespace {

bool is_whole(const ir::Region& r) {
  std::vector<int64_t> s = r.buffer->const_shape();
  if (r.extent != s) return false;
  for (const Expr& m : r.min)
    if (!m.as_int() || *m.as_int() != 0) return false;
  return true;
}

bool is_var(const Expr& e, const Var& v) {
  const auto* a = ir::as<ir::Variable>(e);
  const auto* b = ir::as<ir::Variable>(v);
  return a && b && a->uid == b->uid;
}

/// Fragment accesses inside one parallel loop, classified by how they are indexed.
struct LoopAccesses {
  std::vector<Buffer> full;  // indexed by exactly the loop variables, in order
  std::vector<Buffer> rows;  // 2-d loop, 1-d fragment indexed by the first variable
  std::vector<std::pair<Buffer, SourceLoc>> other; // anything else
};

class CollectLoopAccesses : public ir::IRVisitor {
public:
  CollectLoopAccesses(const ir::Parallel* p) : p_(p) {}
  LoopAccesses out;

public:
  using IRVisitor::visit;

protected:
  void classify(const Buffer& b, const std::vector<Expr>& idx) {
    if (b->scope != Scope::fragment) return;
    size_t n = p_->vars.size();
    bool full = idx.size() == n;
    for (size_t d = 0; full && d < n; ++d) full = is_var(idx[d], p_->vars[d]);
    if (full) return add(out.full, b);
    if (n == 2 && idx.size() == 1 && is_var(idx[0], p_->vars[0])) return add(out.rows, b);
    out.other.push_back({b, loc_});
  }
  static void add(std::vector<Buffer>& v, const Buffer& b) {
    for (const Buffer& x : v)
      if (x->uid == b->uid) return;
    v.push_back(b);
  }
  void visit(const ir::Load* op) override {
    classify(op->buffer, op->indices);
    IRVisitor::visit(op);
  }
  void visit(const ir::Store* op) override {
    if (op->loc.known()) loc_ = op->loc;
    classify(op->buffer, op->indices);
    IRVisitor::visit(op);
  }

private:
  const ir::Parallel* p_;
  SourceLoc loc_;
};

class Inference {
public:
  Inference(const ir::KernelNode& k, const Target& t) : k_(k), t_(t) {
    info_.consumer_threads = k.threads;
  }

  LayoutInfo run() {
    collect(k_.body);
    for (const ir::Gemm* g : gemms_) anchor(g);
    for (bool changed = true; changed;) {
      changed = false;
      for (const ir::Stmt& s : stmts_) changed |= propagate(s);
    }
    for (const Buffer& f : fragments_)
      if (!info_.fragments.count(f->uid)) info_.promoted.insert(f->uid);
    check_accesses();
    assign_shared_layouts();
    return info_;
  }

private:
  void collect(const ir::Stmt& body) {
    ir::for_each_stmt(body, [&](const ir::Stmt& s) {
      stmts_.push_back(s);
      if (const auto* a = ir::as<ir::Allocate>(s)) {
        if (a->buffer->scope == Scope::fragment) fragments_.push_back(a->buffer);
        if (a->buffer->scope == Scope::shared) shared_.push_back(a->buffer);
      }
      if (const auto* g = ir::as<ir::Gemm>(s)) gemms_.push_back(g);
    });
  }

  /// Sets b's layout; user error when it already has a different register layout.
  bool assign(const Buffer& b, const FragmentLayout& l, const SourceLoc& loc, const char* why) {
    auto it = info_.fragments.find(b->uid);
    if (it == info_.fragments.end()) {
      std::vector<int64_t> s = b->const_shape();
      bool fits = l.kind == FragmentLayout::Kind::rows ? s.size() == 1 && s[0] == l.M
                                                        : s.size() == 2 && s[0] == l.M && s[1] == l.N;
      if (!fits) return false;
      info_.fragments[b->uid] = l;
      return true;
    }
    if (!it->second.same_as(l))
      user_error(loc) << "layout conflict: fragment '" << b->name << "' has layout "
                      << it->second.str() << " but " << why << " needs " << l.str()
                      << "; copy one of them through a shared tile";
    return false;
  }

  void anchor(const ir::Gemm* g) {
    GemmKind kind = GemmKind::simt;
    const Buffer &A = g->a.buffer, &B = g->b.buffer, &C = g->c.buffer;
    bool f16 = A->dtype == DType::bf16 || A->dtype == DType::f16;
    bool whole = is_whole(g->a) && is_whole(g->b) && is_whole(g->c);
    std::vector<int64_t> cs = C->const_shape();
    int64_t M = cs[0], N = cs[1];
    int64_t K = g->trans_a ? g->a.extent[0] : g->a.extent[1];
    int threads = k_.threads;
    if (t_.wgmma() && f16 && whole && threads % 128 == 0) {
      int W = threads / 128;
      bool shape_ok = M % (64 * W) == 0 && N % 8 == 0 && N <= 256 && K % 16 == 0;
      // wgmma reads its shared operands through swizzled layouts, which need rows of a multiple
      // of 32 bytes (assign_shared_layouts); a [K, 8] bf16 B tile has 16-byte rows.
      auto swizzlable = [](const Buffer& b) {
        return b->const_shape().back() * dtype_bytes(b->dtype) % 32 == 0;
      };
      // The N values device/arch/sm90/wgmma_ops.cuh has wrappers for (N_VALUES in
      // scripts/gen_wgmma.py; keep the two lists equal).
      static const std::set<int64_t> kWgmmaN = {16, 32, 64, 96, 128, 192, 256};
      shape_ok = shape_ok && kWgmmaN.count(N) && swizzlable(B) &&
                 (A->scope != Scope::shared || swizzlable(A));
      if (shape_ok && B->scope == Scope::shared) {
        if (A->scope == Scope::shared) {
          kind = GemmKind::wgmma_ss;
        } else if (A->scope == Scope::fragment && !g->trans_a) {
          kind = GemmKind::wgmma_rs;
          assign(A, FragmentLayout::wgmma(M, K, W), g->loc, "the A operand of wgmma");
        }
      }
      if (kind != GemmKind::simt)
        assign(C, FragmentLayout::wgmma(M, N, W), g->loc, "the wgmma accumulator");
    } else if (!t_.wgmma() && f16 && whole && threads % 32 == 0 && B->scope == Scope::shared &&
               K % 16 == 0) {
      int warps = threads / 32;
      int wm = warps, wn = 1;
      while (wm > 1 && M % (16 * wm) != 0) wm /= 2, wn *= 2;
      bool fits = M % (16 * wm) == 0 && N % (8 * wn) == 0;
      if (fits && A->scope == Scope::shared) {
        kind = GemmKind::mma;
      } else if (fits && A->scope == Scope::fragment && !g->trans_a && wn == 1) {
        // A from registers: its accumulator layout's k16 chunks are exactly mma's A fragments.
        kind = GemmKind::mma_rs;
        assign(A, FragmentLayout::mma(M, K, wm, 1), g->loc, "the A operand of mma");
      }
      if (kind != GemmKind::simt)
        assign(C, FragmentLayout::mma(M, N, wm, wn), g->loc, "the mma accumulator");
    }
    info_.gemms[g] = kind;
  }

  const FragmentLayout* layout_of(const Buffer& b) {
    auto it = info_.fragments.find(b->uid);
    return it == info_.fragments.end() ? nullptr : &it->second;
  }

  bool propagate(const ir::Stmt& s) {
    bool changed = false;
    if (const auto* p = ir::as<ir::Parallel>(s)) {
      CollectLoopAccesses c(p);
      c.visit(p->body);
      const FragmentLayout* anchor = nullptr;
      for (const Buffer& b : c.out.full)
        if (const FragmentLayout* l = layout_of(b)) anchor = anchor ? anchor : l;
      if (!anchor && p->vars.size() == 2) return false;
      if (anchor) {
        FragmentLayout a = *anchor;
        for (const Buffer& b : c.out.full) changed |= assign(b, a, p->loc, "this parallel loop");
        if (p->vars.size() == 2 && a.kind != FragmentLayout::Kind::rows && a.rows_within_quad())
          for (const Buffer& b : c.out.rows)
            changed |= assign(b, a.rows(), p->loc, "this parallel loop's row access");
      }
      return changed;
    }
    if (const auto* cp = ir::as<ir::Copy>(s)) {
      const Buffer &a = cp->src.buffer, &b = cp->dst.buffer;
      if (a->scope == Scope::fragment && b->scope == Scope::fragment && is_whole(cp->src) &&
          is_whole(cp->dst)) {
        if (const FragmentLayout* l = layout_of(a)) changed |= assign(b, *l, cp->loc, "this copy");
        if (const FragmentLayout* l = layout_of(b)) changed |= assign(a, *l, cp->loc, "this copy");
      }
      return changed;
    }
    if (const auto* r = ir::as<ir::Reduce>(s)) {
      const FragmentLayout* l = layout_of(r->src);
      if (l && r->dim == 1 && l->kind != FragmentLayout::Kind::rows && l->rows_within_quad() &&
          r->dst->scope == Scope::fragment)
        changed |= assign(r->dst, l->rows(), r->loc, "this reduction");
      return changed;
    }
    return false;
  }

  /// Register fragments must be indexed by the loop variables (or as rows); anything else
  /// would need another thread's registers.
  void check_accesses() {
    for (const ir::Stmt& s : stmts_) {
      const auto* p = ir::as<ir::Parallel>(s);
      if (!p) continue;
      CollectLoopAccesses c(p);
      c.visit(p->body);
      for (const auto& [b, loc] : c.out.other)
        if (info_.fragments.count(b->uid))
          user_error(loc.known() ? loc : p->loc)
              << "fragment '" << b->name << "' (layout " << info_.fragments.at(b->uid).str()
              << ") is indexed by something other than the parallel loop's variables; a "
                 "register fragment can only be accessed element-wise (t(i, j), or a row "
                 "vector as t(i)); copy it to a shared tile to access it otherwise";
      // Rows of a fragment: in a 2-d loop the row vector must be a row layout.
      for (const Buffer& b : c.out.rows) {
        auto it = info_.fragments.find(b->uid);
        if (it != info_.fragments.end() && it->second.kind != FragmentLayout::Kind::rows)
          user_error(p->loc) << "layout conflict: fragment '" << b->name << "' is used as a row "
                             << "vector here but has layout " << it->second.str();
      }
    }
    // Rows-fragments accessed in a loop whose anchor lives in shared memory: fine (shared).
  }

  /// A tile as a matrix: its last dimension is the columns, all others together the rows.
  static std::pair<int64_t, int64_t> rows_and_cols(const Buffer& b) {
    std::vector<int64_t> s = b->const_shape();
    int64_t cols = s.empty() ? 1 : s.back();
    return {cols ? b->const_elements() / cols : 0, cols};
  }

  void assign_shared_layouts() {
    std::set<uint64_t> tensor_core_operands;
    for (const auto& [g, kind] : info_.gemms)
      if (kind != GemmKind::simt) {
        if (g->a.buffer->scope == Scope::shared) tensor_core_operands.insert(g->a.buffer->uid);
        tensor_core_operands.insert(g->b.buffer->uid);
      }
    for (const Buffer& b : shared_) {
      int eb = dtype_bytes(b->dtype);
      auto [rows, cols] = rows_and_cols(b);
      bool swz = tensor_core_operands.count(b->uid) && (cols * eb) % 32 == 0;
      info_.shared[b->uid] = swz ? SharedLayout::swizzled(rows, cols, eb)
                                 : SharedLayout::linear(rows, cols, eb);
    }
    for (const Buffer& f : fragments_)
      if (info_.promoted.count(f->uid)) {
        // Rows are all leading dimensions together, as for shared tiles: element (i, j, l) of
        // an [a, b, c] tile is row i * b + j, column l (rows = a alone gave rank-3 fragments a
        // row stride of b * c, found by the random-program GPU comparison).
        auto [rows, cols] = rows_and_cols(f);
        info_.shared[f->uid] = SharedLayout::linear(rows, cols, dtype_bytes(f->dtype));
      }
  }

  const ir::KernelNode& k_;
  Target t_;
  LayoutInfo info_;
  std::vector<ir::Stmt> stmts_;
  std::vector<Buffer> fragments_, shared_;
  std::vector<const ir::Gemm*> gemms_;
};

} // namespace

LayoutInfo infer_layouts(const ir::KernelNode& k, const Target& t) { return Inference(k, t).run(); }

std::string to_string(const ir::KernelNode& k, const LayoutInfo& info) {
  std::ostringstream os;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    if (const auto* a = ir::as<ir::Allocate>(s)) {
      const Buffer& b = a->buffer;
      os << "// " << b->name << ": ";
      if (info.in_registers(b))
        os << "registers " << info.fragment(b).str() << ", " << info.fragment(b).regs_per_thread()
           << " per thread";
      else if (b->scope == Scope::local)
        os << "local: a per-thread array of " << b->const_elements() << " elements";
      else
        os << "shared " << info.shared_layout(b).str()
           << (b->scope == Scope::fragment ? " (fragment kept in shared memory)" : "");
      os << "\n";
    }
    if (const auto* g = ir::as<ir::Gemm>(s))
      os << "// gemm at " << g->loc.str() << ": " << gemm_kind_name(info.gemms.at(g)) << "\n";
  });
  return os.str();
}

} // namespace tp::passes
