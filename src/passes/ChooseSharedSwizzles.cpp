// ChooseSharedSwizzles: see ChooseSharedSwizzles.h.
#include "passes/ChooseSharedSwizzles.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <set>

#include "ir/IRVisitor.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

namespace {

constexpr int kWarp = 32;
constexpr int kBanks = 32;
/// A thread's registers (or trips of a loop over the threads) sampled per access site: enough
/// to see every distinct pattern of the layouts (their register index enters the coordinates
/// through divisions by at most this).
constexpr int kMaxSteps = 64;

uint64_t uid(const Var& v) {
  return ir::as<ir::Variable>(v)->uid;
}

/// The value of an integer index expression with `env`'s variables bound and every other
/// variable (block indices, loop variables, sizes) at 0; nullopt when it reads memory or is
/// not integer arithmetic. Not substitution and the IR's constant folding: a size bound to 0
/// may divide, which must give "unknown" here, not a folding error.
std::optional<int64_t> eval(const Expr& e, const std::map<uint64_t, int64_t>& env) {
  if (const int64_t* v = e.as_int()) return *v;
  if (const auto* v = ir::as<ir::Variable>(e)) {
    auto it = env.find(v->uid);
    return it == env.end() ? 0 : it->second;
  }
  if (const auto* c = ir::as<ir::Cast>(e)) return eval(c->value, env);
  if (const auto* s = ir::as<ir::Select>(e)) {
    std::optional<int64_t> c = eval(s->cond, env);
    if (!c) return std::nullopt;
    return eval(*c ? s->a : s->b, env);
  }
  const auto* b = ir::as<ir::Binary>(e);
  if (!b) return std::nullopt;
  std::optional<int64_t> x = eval(b->a, env), y = eval(b->b, env);
  if (!x || !y) return std::nullopt;
  using ir::BinOp;
  switch (b->op) {
  case BinOp::add:
    return *x + *y;
  case BinOp::sub:
    return *x - *y;
  case BinOp::mul:
    return *x * *y;
  case BinOp::div:
    return *y ? std::optional<int64_t>(*x / *y) : std::nullopt;
  case BinOp::mod:
    return *y ? std::optional<int64_t>(*x % *y) : std::nullopt;
  case BinOp::min:
    return std::min(*x, *y);
  case BinOp::max:
    return std::max(*x, *y);
  case BinOp::eq:
    return *x == *y;
  case BinOp::ne:
    return *x != *y;
  case BinOp::lt:
    return *x < *y;
  case BinOp::le:
    return *x <= *y;
  case BinOp::gt:
    return *x > *y;
  case BinOp::ge:
    return *x >= *y;
  case BinOp::land:
    return *x && *y;
  case BinOp::lor:
    return *x || *y;
  default:
    return ir::bit_op32(b->op, *x, *y);
  }
}

/// A tile index as the (row, col) SharedLayout takes, evaluated.
std::optional<std::pair<int64_t, int64_t>> row_col(const Buffer& b, const std::vector<Expr>& idx,
                                                   const std::map<uint64_t, int64_t>& env) {
  auto [row, col] = shared_row_col(b, idx);
  std::optional<int64_t> r = eval(row, env), c = eval(col, env);
  if (!r || !c) return std::nullopt;
  return std::pair{*r, *c};
}

/// The tile's element accesses in a parallel loop's body.
class TileAccesses : public ir::IRVisitor {
public:
  explicit TileAccesses(const Buffer& b) : b_(b) {}
  std::vector<std::vector<Expr>> found;
  using IRVisitor::visit;

protected:
  void visit(const ir::Load* op) override {
    if (op->buffer->uid == b_->uid) found.push_back(op->indices);
    IRVisitor::visit(op);
  }
  void visit(const ir::Store* op) override {
    if (op->buffer->uid == b_->uid) found.push_back(op->indices);
    IRVisitor::visit(op);
  }

private:
  const Buffer& b_;
};

/// Register r of lane t of a fragment layout, as concrete coordinates (nullopt: no element).
std::optional<std::vector<int64_t>> lane_coords(const FragmentLayout& l, int t, int r) {
  if (Expr ok = l.valid(Expr(t), Expr(r)); ok.defined()) {
    std::optional<int64_t> v = eval(ok, {});
    if (!v || !*v) return std::nullopt;
  }
  std::vector<int64_t> out;
  for (const Expr& c : l.coords(Expr(t), Expr(r))) {
    std::optional<int64_t> v = eval(c, {});
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

class Collect {
public:
  Collect(const LayoutInfo& l, const Buffer& b, int threads) : l_(l), b_(b), threads_(threads) {}
  std::vector<WarpAccess> out;

  void parallel(const ir::Parallel* p) {
    TileAccesses ta(b_);
    ta.visit(p->body);
    if (ta.found.empty()) return;
    const Buffer anchor = parallel_fragments(l_, p).anchor;
    const int eb = dtype_bytes(b_->dtype);
    if (anchor) {
      const FragmentLayout& fl = l_.fragment(anchor);
      const int regs = std::min(fl.regs_per_thread(), kMaxSteps);
      for (const std::vector<Expr>& idx : ta.found)
        for (int r = 0; r < regs; ++r) {
          WarpAccess a{{}, eb};
          for (int t = 0; t < kWarp && t < fl.threads(); ++t)
            if (auto c = lane_coords(fl, t, r)) add_lane(a, idx, bind(p->vars, *c));
          push(a);
        }
      return;
    }
    // No register fragment: iteration e = it * threads + tid, row-major over the extents.
    int64_t n = 1;
    for (int64_t e : p->extents)
      n *= e;
    for (const std::vector<Expr>& idx : ta.found)
      for (int64_t it = 0; it * threads_ < n && it < kMaxSteps; ++it) {
        WarpAccess a{{}, eb};
        for (int t = 0; t < kWarp && it * threads_ + t < n; ++t)
          add_lane(a, idx, bind(p->vars, row_major(it * threads_ + t, p->extents)));
        push(a);
      }
  }

  void copy(const ir::Copy* c) {
    const bool into = c->dst.buffer->uid == b_->uid;
    const ir::Region& mine = into ? c->dst : c->src;
    const ir::Region& other = into ? c->src : c->dst;
    if (!ir::is_whole(mine)) return;
    const std::vector<int64_t> shape = b_->const_shape();
    const int eb = dtype_bytes(b_->dtype);
    const int64_t cols = shape.back(), rows = b_->const_elements() / cols;
    if (other.buffer->scope == Scope::global) {
      // 16-bit tiles move in 16-byte chunks (LowerChunkCopies' for_chunks), the others one
      // element at a time.
      const int64_t per = eb == 2 && cols % 8 == 0 ? 8 : 1;
      const int64_t units = rows * (cols / per);
      for (int64_t it = 0; it * threads_ < units && it < kMaxSteps; ++it) {
        WarpAccess a{{}, static_cast<int>(per) * eb};
        for (int t = 0; t < kWarp && it * threads_ + t < units; ++t) {
          int64_t v = it * threads_ + t;
          a.lanes.push_back({v / (cols / per), (v % (cols / per)) * per});
        }
        push(a);
      }
      return;
    }
    if (!l_.in_registers(other.buffer) || !ir::is_whole(other) ||
        other.buffer->const_shape() != shape)
      return;
    // A fragment's runs of vec registers are one access each where they fit 16 bytes
    // (LowerCopy's shared_run), else one access a register.
    const FragmentLayout& fl = l_.fragment(other.buffer);
    const bool runs = fl.elementwise() && fl.kind != FragmentLayout::Kind::rows && fl.vec >= 2 &&
                      fl.vec * eb <= 16;
    const int step = runs ? fl.vec : 1;
    const int regs = std::min(fl.regs_per_thread(), kMaxSteps);
    for (int r = 0; r < regs; r += step) {
      WarpAccess a{{}, step * eb};
      for (int t = 0; t < kWarp && t < fl.threads(); ++t)
        if (auto co = lane_coords(fl, t, r)) {
          if (co->size() == 1)
            a.lanes.push_back({0, (*co)[0]});
          else
            a.lanes.push_back({(*co)[0], (*co)[1]});
        }
      push(a);
    }
  }

private:
  static std::map<uint64_t, int64_t> bind(const std::vector<Var>& vars,
                                          const std::vector<int64_t>& values) {
    std::map<uint64_t, int64_t> env;
    for (size_t d = 0; d < vars.size() && d < values.size(); ++d)
      env[uid(vars[d])] = values[d];
    return env;
  }
  static std::vector<int64_t> row_major(int64_t e, const std::vector<int64_t>& extents) {
    std::vector<int64_t> c(extents.size());
    for (int d = static_cast<int>(extents.size()) - 1; d >= 0; --d) {
      c[d] = e % extents[d];
      e /= extents[d];
    }
    return c;
  }
  void add_lane(WarpAccess& a, const std::vector<Expr>& idx,
                const std::map<uint64_t, int64_t>& env) {
    if (auto rc = row_col(b_, idx, env)) a.lanes.push_back(*rc);
  }
  void push(WarpAccess& a) {
    if (!a.lanes.empty()) out.push_back(std::move(a));
  }

  const LayoutInfo& l_;
  const Buffer& b_;
  int threads_;
};

/// Wavefronts of one access: lanes in phases of 128 bytes (32, 16 or 8 lanes); in a phase the
/// most distinct 4-byte words any bank must serve.
int64_t access_wavefronts(const WarpAccess& a, const SharedLayout& sl) {
  const int eb = sl.elem_bytes;
  const int phase = std::max(1, std::min(kWarp, 128 / std::max(a.bytes, 4)));
  int64_t total = 0;
  for (size_t p0 = 0; p0 < a.lanes.size(); p0 += phase) {
    std::map<int, std::set<int64_t>> words; // bank -> words
    for (size_t i = p0; i < std::min(a.lanes.size(), p0 + phase); ++i) {
      int64_t byte = sl.offset(a.lanes[i].first, a.lanes[i].second) * eb;
      for (int64_t w = byte / 4; w <= (byte + a.bytes - 1) / 4; ++w)
        words[static_cast<int>(w % kBanks)].insert(w);
    }
    size_t most = 0;
    for (const auto& [bank, ws] : words)
      most = std::max(most, ws.size());
    total += static_cast<int64_t>(most);
  }
  return total;
}

} // namespace

std::vector<WarpAccess> warp_accesses(const ir::KernelNode& k, const LayoutInfo& layouts,
                                      const Buffer& b) {
  Collect c(layouts, b, k.threads);
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    if (const auto* p = ir::as<ir::Parallel>(s)) c.parallel(p);
    if (const auto* cp = ir::as<ir::Copy>(s);
        cp && (cp->src.buffer->uid == b->uid || cp->dst.buffer->uid == b->uid))
      c.copy(cp);
  });
  return c.out;
}

int64_t wavefronts(const std::vector<WarpAccess>& accesses, const SharedLayout& sl) {
  int64_t total = 0;
  for (const WarpAccess& a : accesses)
    total += access_wavefronts(a, sl);
  return total;
}

int64_t conflict_free_wavefronts(const std::vector<WarpAccess>& accesses) {
  int64_t total = 0;
  for (const WarpAccess& a : accesses) {
    const int64_t bytes = static_cast<int64_t>(a.lanes.size()) * std::max(a.bytes, 4);
    total += (bytes + 127) / 128;
  }
  return total;
}

void choose_shared_swizzles(const ir::KernelNode& k, const PipelinePlan& plan,
                            LayoutInfo& layouts) {
  // annotate("shared_swizzle", "0"): every tile as the kernel wrote it (for side-by-side runs).
  if (auto it = k.attrs.find("shared_swizzle"); it != k.attrs.end() && it->second == "0") return;
  std::set<uint64_t> fixed; // layouts the hardware reads: gemm operands, TMA boxes
  for (const auto& [g, kind] : layouts.gemms)
    for (const ir::Region* r : {&g->a, &g->b, &g->c})
      fixed.insert(r->buffer->uid);
  for (const TmaLoad& l : plan.loads)
    fixed.insert(l.copy->dst.buffer->uid);
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    const auto* a = ir::as<ir::Allocate>(s);
    if (!a || fixed.count(a->buffer->uid) || !layouts.in_shared(a->buffer) ||
        layouts.in_registers(a->buffer))
      return;
    const Buffer& b = a->buffer;
    const SharedLayout& now = layouts.shared_layout(b);
    const int eb = dtype_bytes(b->dtype);
    if (now.kind != SharedLayout::Kind::linear || now.pad != 0 || now.rows < 2 ||
        (now.cols * eb) % 32 != 0)
      return;
    std::vector<WarpAccess> acc = warp_accesses(k, layouts, b);
    if (acc.empty()) return;
    const int64_t base = wavefronts(acc, now);
    int64_t best = base;
    SharedLayout pick = now;
    for (int64_t period = 1; period < now.rows; period *= 2) {
      SharedLayout cand = SharedLayout::swizzled(now.rows, now.cols, eb, period);
      int64_t w = wavefronts(acc, cand);
      if (w < best) best = w, pick = cand;
    }
    // Conflicts no swizzle removes are said too, so that `show` points at them.
    const int64_t ideal = conflict_free_wavefronts(acc);
    const std::string rest =
        best > ideal ? fmt::format("; {} without bank conflicts", ideal) : std::string();
    if (best == base) {
      if (best > ideal)
        layouts.shared_note[b->uid] = fmt::format(
            "row-major: {} shared wavefronts of warp 0{}, which no swizzle of whole 16-byte "
            "units lowers",
            best, rest);
      return;
    }
    layouts.shared[b->uid] = pick;
    layouts.shared_note[b->uid] =
        fmt::format("swizzled for its accesses: {} shared wavefronts of warp 0 against {} linear{}",
                    best, base, rest);
  });
}

} // namespace tp::passes
