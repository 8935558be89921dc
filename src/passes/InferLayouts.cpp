// Layout inference: gemm anchors, then propagation through parallel loops, fragment copies and
// reductions until nothing changes; then blocked layouts for the remaining fragments, one seed
// at a time, each propagated the same way. Uses a blocked layout cannot serve send a fragment
// to shared memory (`demotions`), and inference starts over without it, until every use fits.
#include "passes/InferLayouts.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

const char* gemm_kind_name(GemmKind k) {
  switch (k) {
  case GemmKind::wgmma_ss:
    return "wgmma_ss";
  case GemmKind::wgmma_rs:
    return "wgmma_rs";
  case GemmKind::mma:
    return "mma";
  case GemmKind::mma_rs:
    return "mma_rs";
  case GemmKind::simt:
    return "simt";
  }
  return "?";
}

bool LayoutInfo::loads_together(const ir::Copy* c) const {
  auto v = copy_vector.find(c);
  if (v == copy_vector.end() || c->src.buffer->scope != Scope::global) return false;
  return fragment(c->dst.buffer).regs_per_thread() / v->second >= kLoadsTogetherFromRuns;
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

bool is_var(const Expr& e, const Var& v) {
  const auto* a = ir::as<ir::Variable>(e);
  const auto* b = ir::as<ir::Variable>(v);
  return a && b && a->uid == b->uid;
}

/// Fragment accesses inside one parallel loop, classified by how they are indexed.
struct LoopAccesses {
  std::vector<Buffer> full; // indexed by exactly the loop variables, in order
  std::vector<Buffer> rows; // 2-d loop, 1-d fragment indexed by the first variable
  std::vector<Buffer> cols; // 2-d loop, 1-d fragment indexed by the second variable
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
    for (size_t d = 0; full && d < n; ++d)
      full = is_var(idx[d], p_->vars[d]);
    if (full) return add(out.full, b);
    if (n == 2 && idx.size() == 1 && is_var(idx[0], p_->vars[0])) return add(out.rows, b);
    if (n == 2 && idx.size() == 1 && is_var(idx[0], p_->vars[1])) return add(out.cols, b);
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
    for (;;) {
      info_ = LayoutInfo();
      shared_a_.clear();
      info_.consumer_threads = k_.threads;
      for (const ir::Gemm* g : gemms_)
        anchor(g);
      fixpoint();
      seed_blocked();
      std::map<uint64_t, std::string> d = demotions();
      // A gemm's register A operand that the tensor cores could take from shared memory
      // but not from its registers: to shared, and no register layout in later rounds (set
      // here, not left to the next round's anchor(): an earlier gemm's anchor could place it).
      for (const auto& [uid, why] : shared_a_)
        if (!forced_.count(uid) && !d.count(uid)) {
          d[uid] = why;
          kept_in_shared_.insert(uid);
        }
      if (d.empty()) break;
      forced_.insert(d.begin(), d.end());
    }
    for (const Buffer& f : fragments_)
      if (!info_.fragments.count(f->uid)) {
        info_.promoted.insert(f->uid);
        auto it = forced_.find(f->uid);
        info_.shared_reason[f->uid] = it != forced_.end() ? it->second : unplaced_reason(f);
      }
    check_accesses();
    assign_shared_layouts();
    plan_scratch();
    plan_copy_vectors();
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

  void fixpoint() {
    for (bool changed = true; changed;) {
      changed = false;
      for (const ir::Stmt& s : stmts_)
        changed |= propagate(s);
    }
  }

  /// Every fragment without a layout yet, 2-d ones first, gets a blocked layout propagated to
  /// the fragments it meets; a seed whose propagation meets a different layout is undone and
  /// kept in shared memory.
  void seed_blocked() {
    for (int rank : {2, 1})
      for (const Buffer& f : fragments_) {
        if (info_.fragments.count(f->uid) || forced_.count(f->uid) || f->rank() != rank) continue;
        std::string why = blocked_unfit(f);
        if (!why.empty()) {
          forced_[f->uid] = why;
          continue;
        }
        FragmentLayout l = choose_blocked(f->const_shape(), global_bytes(f), k_.threads);
        std::map<uint64_t, FragmentLayout> before = info_.fragments;
        trial_ = true;
        conflict_.clear();
        info_.fragments[f->uid] = l;
        fixpoint();
        trial_ = false;
        if (!conflict_.empty()) {
          info_.fragments = before;
          forced_[f->uid] = conflict_;
        }
      }
  }

  /// Why fragment f cannot have a blocked layout at all (empty when it can).
  std::string blocked_unfit(const Buffer& f) const {
    if (k_.threads % 32 != 0)
      return "the block's " + std::to_string(k_.threads) +
             " threads are not whole warps (register layouts shuffle within warps)";
    for (const Expr& e : f->shape)
      if (!e.as_int() || *e.as_int() <= 0) return "its shape is not a positive constant";
    if (f->rank() != 1 && f->rank() != 2) return "register layouts are 1-d or 2-d";
    FragmentLayout l = choose_blocked(f->const_shape(), global_bytes(f), k_.threads);
    if (l.regs_per_thread() > kMaxFragmentRegs)
      return "it would take " + std::to_string(l.regs_per_thread()) +
             " registers per thread (more than " + std::to_string(kMaxFragmentRegs) + ")";
    return "";
  }

  std::string unplaced_reason(const Buffer& f) const {
    for (const auto& [g, kind] : info_.gemms)
      for (const ir::Region* r : {&g->a, &g->b, &g->c})
        if (r->buffer->uid == f->uid)
          return std::string("an operand of a ") + gemm_kind_name(kind) + " gemm at " +
                 g->loc.str();
    return "no register layout fits its uses";
  }

  /// The narrowest element size among the global tensors copied into or out of f.
  int global_bytes(const Buffer& f) const {
    int eb = std::max(1, dtype_bytes(f->dtype));
    for (const ir::Stmt& s : stmts_)
      if (const auto* cp = ir::as<ir::Copy>(s)) {
        const Buffer &a = cp->src.buffer, &b = cp->dst.buffer;
        if (a->uid == f->uid && b->scope == Scope::global)
          eb = std::min(eb, std::max(1, dtype_bytes(b->dtype)));
        if (b->uid == f->uid && a->scope == Scope::global)
          eb = std::min(eb, std::max(1, dtype_bytes(a->dtype)));
      }
    return eb;
  }

  bool is_elementwise(const Buffer& b) const {
    auto it = info_.fragments.find(b->uid);
    return it != info_.fragments.end() && it->second.elementwise();
  }

  /// Fragments whose blocked-family layout some use cannot serve, with the use.
  std::map<uint64_t, std::string> demotions() const {
    std::map<uint64_t, std::string> out;
    auto demote = [&](const Buffer& b, const std::string& why, const SourceLoc& loc) {
      if (is_elementwise(b) && !out.count(b->uid))
        out[b->uid] = why + (loc.known() ? " (" + loc.str() + ")" : "");
    };
    // Element accesses outside parallel loops read one element in every thread.
    OutsideAccesses oa;
    oa.visit(k_.body);
    for (const auto& [b, loc] : oa.found)
      demote(b, "an element is accessed outside a parallel loop", loc);
    for (const ir::Stmt& s : stmts_) {
      if (const auto* p = ir::as<ir::Parallel>(s)) {
        CollectLoopAccesses c(p);
        c.visit(p->body);
        for (const auto& [b, loc] : c.out.other)
          demote(b, "a parallel loop indexes it by other than its variables",
                 loc.known() ? loc : p->loc);
        const FragmentLayout* anchor = nullptr;
        for (const Buffer& b : c.out.full)
          if (info_.fragments.count(b->uid) && !anchor) anchor = &info_.fragments.at(b->uid);
        std::vector<Buffer> all = c.out.full;
        all.insert(all.end(), c.out.rows.begin(), c.out.rows.end());
        all.insert(all.end(), c.out.cols.begin(), c.out.cols.end());
        if (!anchor) {
          for (const Buffer& b : all)
            demote(b,
                   "a parallel loop uses it without a register fragment indexed by all of "
                   "its variables",
                   p->loc);
          continue;
        }
        if (writes_local(p->body))
          for (const Buffer& b : all)
            demote(b, "a parallel loop over it writes a local tile", p->loc);
        for (const Buffer& b : c.out.full)
          if (is_elementwise(b) && !info_.fragments.at(b->uid).same_as(*anchor))
            demote(b, "a parallel loop mixes it with another register layout", p->loc);
        for (const Buffer& b : c.out.rows)
          if (is_elementwise(b) &&
              !(anchor->has_rows() && anchor->kind != FragmentLayout::Kind::rows &&
                info_.fragments.at(b->uid).same_as(anchor->rows())))
            demote(b, "a parallel loop reads it as a row vector of another layout", p->loc);
        for (const Buffer& b : c.out.cols)
          if (is_elementwise(b) && !(anchor->kind == FragmentLayout::Kind::blocked &&
                                     info_.fragments.at(b->uid).same_as(anchor->cols())))
            demote(b, "a parallel loop reads it as a column vector of another layout", p->loc);
      } else if (const auto* cp = ir::as<ir::Copy>(s)) {
        const Buffer &a = cp->src.buffer, &b = cp->dst.buffer;
        bool ra = info_.fragments.count(a->uid), rb = info_.fragments.count(b->uid);
        if (b->scope == Scope::local) demote(a, "it is copied to a local tile", cp->loc);
        if (ra && rb) {
          bool same_place = cp->src.extent == cp->dst.extent;
          for (size_t d = 0; same_place && d < cp->src.min.size(); ++d)
            same_place = cp->src.min[d].as_int() && cp->dst.min[d].as_int() &&
                         *cp->src.min[d].as_int() == *cp->dst.min[d].as_int();
          if (!info_.fragments.at(a->uid).same_as(info_.fragments.at(b->uid)) || !same_place) {
            demote(b, "a copy from a fragment of another layout or place", cp->loc);
            demote(a, "a copy to a fragment of another layout or place", cp->loc);
          }
        }
      } else if (const auto* r = ir::as<ir::Reduce>(s)) {
        bool rs = info_.fragments.count(r->src->uid), rd = info_.fragments.count(r->dst->uid);
        if (is_elementwise(r->src)) {
          ReducePlan rp = plan_reduce(info_.fragments.at(r->src->uid), r->dim);
          if (!rp.supported)
            demote(r->src, "a reduction: " + rp.why_not, r->loc);
          else if (r->dst->scope == Scope::local)
            demote(r->src, "a reduction into a local tile", r->loc);
          else if (rd && !info_.fragments.at(r->dst->uid).same_as(rp.result))
            demote(r->dst, "a reduction gives it another layout", r->loc);
        } else if (rd && is_elementwise(r->dst)) {
          demote(r->dst,
                 rs ? "a reduction of an accumulator gives it another layout"
                    : "a reduction of a shared tile writes it",
                 r->loc);
        }
      } else if (const auto* g = ir::as<ir::Gemm>(s)) {
        for (const ir::Region* rg : {&g->a, &g->b, &g->c})
          demote(rg->buffer, "an operand of a gemm", g->loc);
      } else if (const auto* pr = ir::as<ir::Print>(s)) {
        if (pr->tile) demote(pr->tile, "printed as a tile", pr->loc);
      }
    }
    if (out.empty()) budget(out);
    return out;
  }

  /// All register fragments together (accumulators included, lifetimes ignored) stay within
  /// kMaxKernelFragmentRegs per thread: past it the largest blocked fragment goes to shared
  /// memory (ptxas would spill registers instead, which is slower than shared memory).
  void budget(std::map<uint64_t, std::string>& out) const {
    int total = 0;
    const Buffer* largest = nullptr;
    int largest_regs = 0;
    for (const Buffer& f : fragments_) {
      auto it = info_.fragments.find(f->uid);
      if (it == info_.fragments.end()) continue;
      int n = it->second.regs_per_thread();
      total += n;
      if (it->second.elementwise() && n > largest_regs) largest = &f, largest_regs = n;
    }
    if (total > kMaxKernelFragmentRegs && largest)
      out[(*largest)->uid] = "the kernel's register fragments would take " + std::to_string(total) +
                             " registers per thread (more than " +
                             std::to_string(kMaxKernelFragmentRegs) + "); this is the largest";
  }

  static bool writes_local(const ir::Stmt& body) {
    bool w = false;
    ir::for_each_stmt(body, [&](const ir::Stmt& s) {
      if (const auto* st = ir::as<ir::Store>(s)) w |= st->buffer->scope == Scope::local;
    });
    return w;
  }

  /// Vector runs for copies between a global tensor and a whole blocked-family fragment whose
  /// last dimension lies along the tensor's last (contiguous) one, both of 16- or 32-bit floats.
  void plan_copy_vectors() {
    auto vector_float = [](DType t) {
      return t == DType::f32 || t == DType::bf16 || t == DType::f16;
    };
    for (const ir::Stmt& s : stmts_) {
      const auto* cp = ir::as<ir::Copy>(s);
      if (!cp) continue;
      const ir::Region &src = cp->src, &dst = cp->dst;
      const ir::Region* g = src.buffer->scope == Scope::global ? &src : &dst;
      const ir::Region* f = g == &src ? &dst : &src;
      if (g->buffer->scope != Scope::global || !is_elementwise(f->buffer) || !ir::is_whole(*f))
        continue;
      const FragmentLayout& l = info_.fragments.at(f->buffer->uid);
      if (l.kind == FragmentLayout::Kind::rows || l.vec < 2) continue;
      if (!vector_float(g->buffer->dtype) || !vector_float(f->buffer->dtype)) continue;
      // The fragment's columns must run along the tensor's last dimension.
      int last_nonunit = -1, count = 0;
      for (size_t d = 0; d < g->extent.size(); ++d)
        if (g->extent[d] != 1) last_nonunit = static_cast<int>(d), ++count;
      std::vector<int64_t> fs = f->buffer->const_shape();
      int f_nonunit = 0;
      for (int64_t e : fs)
        f_nonunit += e != 1;
      if (count != f_nonunit || last_nonunit != g->buffer->rank() - 1 ||
          g->extent.back() != fs.back())
        continue;
      info_.copy_vector[cp] = l.vec;
    }
  }

  /// Scratch for reductions whose output elements span warps.
  void plan_scratch() {
    for (const ir::Stmt& s : stmts_) {
      const auto* r = ir::as<ir::Reduce>(s);
      if (!r || !info_.fragments.count(r->src->uid)) continue;
      ReducePlan rp = plan_reduce(info_.fragments.at(r->src->uid), r->dim);
      if (rp.scratch_elems == 0) continue;
      Buffer b = ir::make_buffer(r->src->name + "_xwarp", Scope::shared, DType::f32,
                                 {Expr(rp.scratch_elems)}, r->src->kernel_uid, r->loc);
      info_.reduce_scratch[r] = b;
      info_.shared[b->uid] = SharedLayout::linear(1, rp.scratch_elems, 4);
    }
  }

  /// Sets b's layout; user error when it already has a different register layout (while
  /// seeding a blocked layout: records the conflict instead).
  bool assign(const Buffer& b, const FragmentLayout& l, const SourceLoc& loc, const char* why) {
    auto it = info_.fragments.find(b->uid);
    if (it == info_.fragments.end()) {
      if (l.elementwise() && forced_.count(b->uid)) return false;
      if (kept_in_shared_.count(b->uid)) return false;
      std::vector<int64_t> s = b->const_shape();
      bool fits = l.rank() == 1
                      ? s.size() == 1 && s[0] == (l.kind == FragmentLayout::Kind::cols ? l.N : l.M)
                      : s.size() == 2 && s[0] == l.M && s[1] == l.N;
      if (!fits) return false;
      info_.fragments[b->uid] = l;
      return true;
    }
    if (!it->second.same_as(l) && trial_) {
      if (conflict_.empty())
        conflict_ = "its blocked layout would meet " + it->second.str() + " of '" + b->name +
                    "' in " + why + " (" + loc.str() + ")";
      return false;
    }
    if (!it->second.same_as(l)) {
      // An mma accumulator's layout, or a row vector derived from one.
      auto from_mma = [](const FragmentLayout& f) {
        return f.kind == FragmentLayout::Kind::mma_acc ||
               (f.kind == FragmentLayout::Kind::rows && f.parent == FragmentLayout::Kind::mma_acc);
      };
      const bool mixed = !mma_note_.empty() && (from_mma(it->second) || from_mma(l));
      user_error(loc) << "layout conflict: fragment '" << b->name << "' has layout "
                      << it->second.str() << " but " << why << " needs " << l.str()
                      << "; copy one of them through a shared tile"
                      << (mixed ? " (" + mma_note_ + ")" : std::string());
    }
    return false;
  }

  void anchor(const ir::Gemm* g) {
    GemmKind kind = GemmKind::simt;
    const Buffer &A = g->a.buffer, &B = g->b.buffer, &C = g->c.buffer;
    bool f16 = A->dtype == DType::bf16 || A->dtype == DType::f16;
    bool whole = ir::is_whole(g->a) && ir::is_whole(g->b) && ir::is_whole(g->c);
    std::vector<int64_t> cs = C->const_shape();
    int64_t M = cs[0], N = cs[1];
    int64_t K = g->trans_a ? g->a.extent[0] : g->a.extent[1];
    int threads = k_.threads;
    // A fragment operand some use keeps in shared memory (forced_, from the previous round)
    // is read from there like a shared tile.
    auto in_shared = [&](const Buffer& b) {
      return b->scope == Scope::shared || (b->scope == Scope::fragment && forced_.count(b->uid));
    };
    const bool a_shared = in_shared(A), b_shared = in_shared(B);
    // Read from shared memory by this gemm, so never placed in registers by a later use.
    for (const Buffer& x : {A, B})
      if (x->scope == Scope::fragment && in_shared(x)) kept_in_shared_.insert(x->uid);
    if (t_.wgmma() && f16 && whole && threads % 128 == 0) {
      int W = threads / 128;
      // wgmma reads its shared operands through swizzled layouts, which need rows of a multiple
      // of 32 bytes (assign_shared_layouts); a [K, 8] bf16 B tile has 16-byte rows.
      auto swizzlable = [](const Buffer& b) {
        return b->const_shape().back() * dtype_bytes(b->dtype) % 32 == 0;
      };
      // Why wgmma cannot take this shape (empty when it can). device/arch/sm90/wgmma_ops.cuh
      // wraps every N that is a multiple of 16 up to 256 (N_VALUES in scripts/gen_wgmma.py; keep
      // the two rules equal); PTX also has the odd multiples of 8, which no tile here needs.
      const std::string why_not =
          M % (64 * W) != 0 ? "its " + std::to_string(M) + " rows are not 64 per consumer warpgroup"
          : N % 16 != 0 || N > 256
              ? "its width N = " + std::to_string(N) + " is not a multiple of 16 up to 256"
          : K % 16 != 0 ? "its K = " + std::to_string(K) + " is not a multiple of 16"
          : !swizzlable(B) || (a_shared && !swizzlable(A))
              ? "a shared operand's rows are not a multiple of 32 bytes (no swizzle)"
              : "";
      if (why_not.empty() && b_shared) {
        if (a_shared) {
          kind = GemmKind::wgmma_ss;
        } else if (A->scope == Scope::fragment && !g->trans_a) {
          kind = GemmKind::wgmma_rs;
          assign(A, FragmentLayout::wgmma(M, K, W), g->loc, "the A operand of wgmma");
        }
      }
      if (kind != GemmKind::simt)
        assign(C, FragmentLayout::wgmma(M, N, W), g->loc, "the wgmma accumulator");
      else if (mma_note_.empty() && b_shared && !why_not.empty())
        mma_note_ = "the gemm at " + g->loc.str() + " runs as mma, not wgmma: " + why_not;
    }
    // mma.sync: the sm_80 path, and on sm_90 the gemms wgmma's shape rules refuse (a 64-row
    // tile over two warpgroups, an N it has no wrapper for), which sm_90 runs too; the SIMT
    // loop is the last resort, about two orders of magnitude slower than either.
    if (kind == GemmKind::simt && f16 && whole && threads % 32 == 0 && b_shared && K % 16 == 0) {
      // Every warp takes a part: a grid wm x wn of exactly `warps`, as many rows of warps as
      // divide M. (Halving wm from a warp count that is not a power of two lost warps: 12
      // warps became 1 x 8, and the other four computed rows past the tile and stored them
      // into the next block's output.)
      const int warps = threads / 32;
      int wm = warps, wn = 1;
      bool fits = false;
      for (int m = warps; m >= 1 && !fits; --m) {
        if (warps % m != 0) continue;
        wm = m;
        wn = warps / m;
        fits = M % (16 * wm) == 0 && N % (8 * wn) == 0;
      }
      if (fits && a_shared) {
        kind = GemmKind::mma;
      } else if (fits && A->scope == Scope::fragment && !g->trans_a && wn == 1) {
        // A from registers: its accumulator layout's k16 chunks are exactly mma's A fragments.
        kind = GemmKind::mma_rs;
        assign(A, FragmentLayout::mma(M, K, wm, 1), g->loc, "the A operand of mma");
      } else if (fits && A->scope == Scope::fragment) {
        // Warps side by side along N each need whole rows of A, which no accumulator layout
        // gives them: A goes through shared memory (ldmatrix), not the SIMT loop.
        shared_a_[A->uid] = "the A operand of an mma gemm whose warps share rows (" + g->loc.str() +
                            "): mma reads it from shared memory";
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
        for (const Buffer& b : c.out.full)
          changed |= assign(b, a, p->loc, "this parallel loop");
        if (p->vars.size() == 2 && a.kind != FragmentLayout::Kind::rows && a.has_rows())
          for (const Buffer& b : c.out.rows)
            changed |= assign(b, a.rows(), p->loc, "this parallel loop's row access");
        if (p->vars.size() == 2 && a.kind == FragmentLayout::Kind::blocked)
          for (const Buffer& b : c.out.cols)
            changed |= assign(b, a.cols(), p->loc, "this parallel loop's column access");
      }
      return changed;
    }
    if (const auto* cp = ir::as<ir::Copy>(s)) {
      const Buffer &a = cp->src.buffer, &b = cp->dst.buffer;
      if (a->scope == Scope::fragment && b->scope == Scope::fragment && ir::is_whole(cp->src) &&
          ir::is_whole(cp->dst)) {
        if (const FragmentLayout* l = layout_of(a)) changed |= assign(b, *l, cp->loc, "this copy");
        if (const FragmentLayout* l = layout_of(b)) changed |= assign(a, *l, cp->loc, "this copy");
      }
      return changed;
    }
    if (const auto* r = ir::as<ir::Reduce>(s)) {
      const FragmentLayout* l = layout_of(r->src);
      if (l && l->kind == FragmentLayout::Kind::blocked && r->dst->scope == Scope::fragment) {
        ReducePlan rp = plan_reduce(*l, r->dim);
        if (rp.supported) changed |= assign(r->dst, rp.result, r->loc, "this reduction");
      } else if (l && r->dim == 1 && l->kind != FragmentLayout::Kind::rows && l->has_rows() &&
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
      for (const Buffer& b : c.out.cols)
        if (info_.fragments.count(b->uid) &&
            info_.fragments.at(b->uid).kind != FragmentLayout::Kind::cols)
          user_error(p->loc) << "fragment '" << b->name << "' (layout "
                             << info_.fragments.at(b->uid).str()
                             << ") is indexed by the parallel loop's second variable; only a "
                                "column vector of a blocked fragment can be; copy it to a shared "
                                "tile to access it otherwise";
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
        if (!info_.fragments.count(g->a.buffer->uid)) tensor_core_operands.insert(g->a.buffer->uid);
        tensor_core_operands.insert(g->b.buffer->uid);
      }
    for (const Buffer& b : shared_) {
      int eb = dtype_bytes(b->dtype);
      auto [rows, cols] = rows_and_cols(b);
      bool swz = tensor_core_operands.count(b->uid) && (cols * eb) % 32 == 0;
      info_.shared[b->uid] =
          swz ? SharedLayout::swizzled(rows, cols, eb) : SharedLayout::linear(rows, cols, eb);
    }
    for (const Buffer& f : fragments_)
      if (info_.promoted.count(f->uid)) {
        // Rows are all leading dimensions together, as for shared tiles: element (i, j, l) of
        // an [a, b, c] tile is row i * b + j, column l (rows = a alone gave rank-3 fragments a
        // row stride of b * c, found by the random-program GPU comparison). A tensor-core
        // operand is swizzled as a shared one is (wgmma needs it; ldmatrix avoids conflicts).
        auto [rows, cols] = rows_and_cols(f);
        int eb = dtype_bytes(f->dtype);
        bool swz = tensor_core_operands.count(f->uid) && (cols * eb) % 32 == 0;
        info_.shared[f->uid] =
            swz ? SharedLayout::swizzled(rows, cols, eb) : SharedLayout::linear(rows, cols, eb);
      }
  }

  /// Fragment element accesses outside parallel loops.
  class OutsideAccesses : public ir::IRVisitor {
  public:
    std::vector<std::pair<Buffer, SourceLoc>> found;
    using IRVisitor::visit;

  protected:
    void visit(const ir::Parallel*) override {}
    void visit(const ir::Load* op) override {
      if (op->buffer->scope == Scope::fragment) found.push_back({op->buffer, loc_});
      IRVisitor::visit(op);
    }
    void visit(const ir::Store* op) override {
      if (op->loc.known()) loc_ = op->loc;
      if (op->buffer->scope == Scope::fragment) found.push_back({op->buffer, op->loc});
      IRVisitor::visit(op);
    }
    void visit(const ir::AtomicAdd* op) override {
      if (op->buffer->scope == Scope::fragment) found.push_back({op->buffer, op->loc});
      IRVisitor::visit(op);
    }

  private:
    SourceLoc loc_;
  };

  const ir::KernelNode& k_;
  Target t_;
  LayoutInfo info_;
  std::map<uint64_t, std::string> forced_; // fragments kept in shared memory, and why
  bool trial_ = false;
  std::map<uint64_t, std::string> shared_a_; // this round's register A operands better shared
  std::set<uint64_t> kept_in_shared_;        // such operands: never given a register layout
  std::string conflict_;
  // Why a gemm on a wgmma target runs as mma (said with a layout conflict it causes).
  std::string mma_note_;
  std::vector<ir::Stmt> stmts_;
  std::vector<Buffer> fragments_, shared_;
  std::vector<const ir::Gemm*> gemms_;
};

} // namespace

LayoutInfo infer_layouts(const ir::KernelNode& k, const Target& t) {
  return Inference(k, t).run();
}

FragmentLayout choose_blocked(const std::vector<int64_t>& shape, int global_bytes, int threads) {
  internal_assert(!shape.empty() && shape.size() <= 2) << "blocked layout of rank " << shape.size();
  int64_t M = shape.size() == 2 ? shape[0] : 1, N = shape.back();
  int vec = std::max(1, 16 / std::max(1, global_bytes));
  while (vec > 1 && N % vec != 0)
    vec /= 2;
  int64_t runs = N / vec;
  int tn = 1;
  while (tn * 2 <= threads && threads % (tn * 2) == 0 && runs % (tn * 2) == 0)
    tn *= 2;
  // Fewer rows than thread rows (a row of 5000 = 625 runs of 8, which no power of two
  // divides): rather than leave threads without elements, spread the runs over more threads
  // and let the last run block be ragged, its registers past N guarded (Layout.h), much as
  // Triton masks a power-of-two block. Only here: layouts whose runs divide evenly stay as
  // they were.
  while (threads / tn > M && tn < runs && tn * 2 <= threads && threads % (tn * 2) == 0)
    tn *= 2;
  FragmentLayout l = FragmentLayout::blocked(M, N, vec, tn, threads);
  return shape.size() == 2 ? l : l.cols();
}

namespace {
class FindParallelFragments : public ir::IRVisitor {
public:
  FindParallelFragments(const LayoutInfo& l, const ir::Parallel* p) : l_(l), p_(p) {}
  ParallelFragments out;
  using IRVisitor::visit;

protected:
  void look(const Buffer& b, const std::vector<Expr>& idx) {
    if (!l_.in_registers(b)) return;
    if (!out.any_register) out.any_register = b;
    bool full = idx.size() == p_->vars.size();
    for (size_t d = 0; full && d < idx.size(); ++d) {
      const auto* v = ir::as<ir::Variable>(idx[d]);
      full = v && v->uid == ir::as<ir::Variable>(p_->vars[d])->uid;
    }
    if (full && !out.anchor) out.anchor = b;
  }
  void visit(const ir::Load* op) override {
    look(op->buffer, op->indices);
    IRVisitor::visit(op);
  }
  void visit(const ir::Store* op) override {
    look(op->buffer, op->indices);
    if (op->buffer->scope == Scope::local && !out.local_written) out.local_written = op->buffer;
    IRVisitor::visit(op);
  }

private:
  const LayoutInfo& l_;
  const ir::Parallel* p_;
};
} // namespace

ParallelFragments parallel_fragments(const LayoutInfo& layouts, const ir::Parallel* p) {
  FindParallelFragments f(layouts, p);
  f.visit(p->body);
  return f.out;
}

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
      else if (b->scope == Scope::fragment)
        os << "shared " << info.shared_layout(b).str() << " (fragment kept in shared memory: "
           << (info.shared_reason.count(b->uid) ? info.shared_reason.at(b->uid) : "?") << ")";
      else
        os << "shared " << info.shared_layout(b).str();
      if (auto n = info.shared_note.find(b->uid); n != info.shared_note.end())
        os << " (" << n->second << ")";
      os << "\n";
    }
    if (const auto* g = ir::as<ir::Gemm>(s))
      os << "// gemm at " << g->loc.str() << ": " << gemm_kind_name(info.gemms.at(g)) << "\n";
    if (const auto* c = ir::as<ir::Copy>(s); c && info.copy_vector.count(c)) {
      const Buffer& g = c->src.buffer->scope == Scope::global ? c->src.buffer : c->dst.buffer;
      int v = info.copy_vector.at(c);
      os << "// copy at " << c->loc.str() << ": runs of " << v << " elements, "
         << v * dtype_bytes(g->dtype) << " bytes of '" << g->name << "' per thread";
      if (c->src.buffer->scope == Scope::global)
        os << (info.loads_together(c)
                   ? std::string("; every run's load issued before any is used")
                   : "; one run loaded at a time (fewer than " +
                         std::to_string(LayoutInfo::kLoadsTogetherFromRuns) + " a thread)");
      os << "\n";
    }
    // Accumulators whose rows stay in a quad reduce the one way; the others print their plan.
    if (const auto* r = ir::as<ir::Reduce>(s);
        r && info.in_registers(r->src) &&
        (info.fragment(r->src).kind == FragmentLayout::Kind::blocked ||
         (info.fragment(r->src).kind == FragmentLayout::Kind::mma_acc &&
          !info.fragment(r->src).rows_within_quad())))
      os << "// reduce at " << r->loc.str() << ": "
         << plan_reduce(info.fragment(r->src), r->dim).str() << "\n";
  });
  return os.str();
}

} // namespace tp::passes
