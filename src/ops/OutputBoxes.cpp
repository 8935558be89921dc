// Output boxes from the kernel's writes (OutputBoxes.h).
#include "ops/OutputBoxes.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/ArgBinding.h"
#include "ir/IR.h"

namespace tp::ops {

namespace {

using ir::as;

// Enough to enumerate a 256 x 256 element-wise store in a few tiles, small enough that a
// kernel that is not derivable gives up in milliseconds.
constexpr int64_t kMaxSteps = 1 << 22;

struct NotDerivable {};

class Walker {
public:
  Walker(const ir::KernelNode& k, ir::Binding env, const std::vector<ArgSpec>& specs,
         const std::vector<int>& outputs)
      : env_(std::move(env)), specs_(specs) {
    for (int i : outputs)
      out_index_[k.params.at(i)->uid] = i;
  }

  void walk(const ir::Stmt& s) {
    if (!s.defined() || !writes_output(s)) return;
    if (++steps_ > kMaxSteps) throw NotDerivable{};
    if (const auto* q = as<ir::Seq>(s)) {
      for (const ir::Stmt& x : q->stmts)
        walk(x);
    } else if (const auto* l = as<ir::Let>(s)) {
      bind(l->var, l->value, [&] { walk(l->body); });
    } else if (const auto* f = as<ir::For>(s)) {
      const int64_t lo = eval(f->min), n = eval(f->extent);
      for (int64_t i = 0; i < n; ++i)
        with(f->var, lo + i, [&] { walk(f->body); });
    } else if (const auto* p = as<ir::Parallel>(s)) {
      parallel(*p, 0);
    } else if (const auto* c = as<ir::IfThenElse>(s)) {
      walk(eval(c->cond) ? c->then_case : c->else_case);
    } else if (const auto* c = as<ir::Copy>(s)) {
      region(c->dst);
    } else if (const auto* f = as<ir::Fill>(s)) {
      region(f->dst);
    } else if (const auto* st = as<ir::Store>(s)) {
      point(st->buffer, st->indices);
    } else {
      throw NotDerivable{}; // an atomic add: many blocks write one element
    }
  }

  std::vector<Box> boxes() const {
    std::vector<Box> out = boxes_;
    for (const auto& [index, pts] : points_) {
      // Element stores must fill their bounding box exactly: a box claims every element in it.
      const size_t rank = specs_.at(index).shape.size();
      Box b{index, std::vector<int64_t>(rank, INT64_MAX), std::vector<int64_t>(rank, 0)};
      std::vector<int64_t> hi(rank, INT64_MIN);
      for (const std::vector<int64_t>& x : pts)
        for (size_t d = 0; d < rank; ++d) {
          b.min[d] = std::min(b.min[d], x[d]);
          hi[d] = std::max(hi[d], x[d]);
        }
      int64_t volume = 1;
      for (size_t d = 0; d < rank; ++d) {
        b.extent[d] = hi[d] - b.min[d] + 1;
        volume *= b.extent[d];
      }
      if (volume != static_cast<int64_t>(pts.size())) throw NotDerivable{};
      out.push_back(b);
    }
    // Boxes of one tensor written twice (two copies of one tile) count once.
    std::sort(out.begin(), out.end(), [](const Box& a, const Box& b) {
      return std::tie(a.tensor, a.min, a.extent) < std::tie(b.tensor, b.min, b.extent);
    });
    out.erase(std::unique(out.begin(), out.end(),
                          [](const Box& a, const Box& b) {
                            return a.tensor == b.tensor && a.min == b.min && a.extent == b.extent;
                          }),
              out.end());
    // Boxes that continue each other along one dimension (the two halves of a row written
    // apart) become one: fewer, larger reference calls.
    for (bool merged = true; merged;) {
      merged = false;
      for (size_t i = 0; i < out.size() && !merged; ++i)
        for (size_t j = 0; j < out.size() && !merged; ++j)
          if (i != j && continues(out[i], out[j])) {
            for (size_t d = 0; d < out[i].min.size(); ++d)
              if (out[i].min[d] != out[j].min[d]) out[i].extent[d] += out[j].extent[d];
            out.erase(out.begin() + static_cast<std::ptrdiff_t>(j));
            merged = true;
          }
    }
    return out;
  }

private:
  // b starts where a ends along one dimension and matches it along the others.
  static bool continues(const Box& a, const Box& b) {
    if (a.tensor != b.tensor) return false;
    int along = -1;
    for (size_t d = 0; d < a.min.size(); ++d) {
      if (a.min[d] == b.min[d] && a.extent[d] == b.extent[d]) continue;
      if (along >= 0 || a.min[d] + a.extent[d] != b.min[d]) return false;
      along = static_cast<int>(d);
    }
    return along >= 0;
  }

  // Whether `s` writes an output: walking a statement that does not (the K loop of a GEMM, a
  // reduction) would only cost time.
  bool writes_output(const ir::Stmt& s) {
    auto it = writes_.find(s.get());
    if (it != writes_.end()) return it->second;
    bool w = false;
    if (const auto* q = as<ir::Seq>(s)) {
      for (const ir::Stmt& x : q->stmts)
        w = w || writes_output(x);
    } else if (const auto* l = as<ir::Let>(s)) {
      w = l->body.defined() && writes_output(l->body);
    } else if (const auto* f = as<ir::For>(s)) {
      w = writes_output(f->body);
    } else if (const auto* p = as<ir::Parallel>(s)) {
      w = writes_output(p->body);
    } else if (const auto* c = as<ir::IfThenElse>(s)) {
      w = writes_output(c->then_case) || (c->else_case.defined() && writes_output(c->else_case));
    } else if (const auto* c = as<ir::Copy>(s)) {
      w = is_output(c->dst.buffer);
    } else if (const auto* f = as<ir::Fill>(s)) {
      w = is_output(f->dst.buffer);
    } else if (const auto* st = as<ir::Store>(s)) {
      w = is_output(st->buffer);
    } else if (const auto* a = as<ir::AtomicAdd>(s)) {
      w = is_output(a->buffer);
    }
    writes_[s.get()] = w;
    return w;
  }

  bool is_output(const ir::Buffer& b) const { return out_index_.count(b->uid) > 0; }

  void parallel(const ir::Parallel& p, size_t d) {
    if (d == p.vars.size()) return walk(p.body);
    for (int64_t i = 0; i < p.extents[d]; ++i)
      with(p.vars[d], i, [&] { parallel(p, d + 1); });
  }

  // The box [min, min + extent) of a copy's or fill's destination, clipped to the tensor:
  // writes past its end are dropped.
  void region(const ir::Region& r) {
    if (!is_output(r.buffer)) return;
    const int index = out_index_.at(r.buffer->uid);
    const std::vector<int64_t>& shape = specs_.at(index).shape;
    Box b{index, {}, {}};
    for (size_t d = 0; d < r.min.size(); ++d) {
      const int64_t lo = std::max<int64_t>(eval(r.min[d]), 0);
      const int64_t hi = std::min(eval(r.min[d]) + r.extent[d], shape[d]);
      if (hi <= lo) return; // the whole box lies outside: nothing is written
      b.min.push_back(lo);
      b.extent.push_back(hi - lo);
    }
    boxes_.push_back(b);
  }

  void point(const ir::Buffer& buf, const std::vector<Expr>& idx) {
    if (!is_output(buf)) return;
    std::vector<int64_t> x;
    for (const Expr& e : idx)
      x.push_back(eval(e));
    points_[out_index_.at(buf->uid)].insert(x);
  }

  template <class F>
  void with(const Expr& var, int64_t v, F&& f) {
    const uint64_t uid = as<ir::Variable>(var)->uid;
    auto old = env_.find(uid);
    std::optional<int64_t> saved;
    if (old != env_.end()) saved = old->second;
    env_[uid] = v;
    f();
    if (saved)
      env_[uid] = *saved;
    else
      env_.erase(uid);
  }

  // A let whose value the walk cannot evaluate (a float, a load) stays unbound: a write whose
  // position uses it is then not derivable, and one that does not use it is unaffected.
  template <class F>
  void bind(const Expr& var, const Expr& value, F&& f) {
    try {
      const int64_t v = eval(value);
      with(var, v, f);
    } catch (const NotDerivable&) {
      f();
    }
  }

  int64_t eval(const Expr& e) const {
    if (const int64_t* c = e.as_int()) return *c;
    if (const auto* v = as<ir::Variable>(e)) {
      auto it = env_.find(v->uid);
      if (it == env_.end()) throw NotDerivable{};
      return it->second;
    }
    if (const auto* s = as<ir::Select>(e)) return eval(s->cond) ? eval(s->a) : eval(s->b);
    if (const auto* c = as<ir::Cast>(e)) {
      if (!is_int(c->dtype) || !is_int(c->value.dtype())) throw NotDerivable{};
      return eval(c->value);
    }
    const auto* b = as<ir::Binary>(e);
    if (!b || !is_int(b->a.dtype()) || !is_int(b->b.dtype())) throw NotDerivable{};
    const int64_t x = eval(b->a), y = eval(b->b);
    // The language's integer semantics, as the interpreter evaluates them (ir::eval_int).
    switch (b->op) {
    case ir::BinOp::add:
      return x + y;
    case ir::BinOp::sub:
      return x - y;
    case ir::BinOp::mul:
      return x * y;
    case ir::BinOp::div:
      if (y == 0) throw NotDerivable{};
      return x / y;
    case ir::BinOp::mod:
      if (y == 0) throw NotDerivable{};
      return x % y;
    case ir::BinOp::min:
      return std::min(x, y);
    case ir::BinOp::max:
      return std::max(x, y);
    case ir::BinOp::eq:
      return x == y;
    case ir::BinOp::ne:
      return x != y;
    case ir::BinOp::lt:
      return x < y;
    case ir::BinOp::le:
      return x <= y;
    case ir::BinOp::gt:
      return x > y;
    case ir::BinOp::ge:
      return x >= y;
    case ir::BinOp::land:
      return x && y;
    case ir::BinOp::lor:
      return x || y;
    default:
      return ir::bit_op32(b->op, x, y);
    }
  }

  static bool is_int(DType t) { return t == DType::i32 || t == DType::boolean; }

  ir::Binding env_;
  const std::vector<ArgSpec>& specs_;
  std::map<uint64_t, int> out_index_;
  std::map<const ir::StmtNode*, bool> writes_;
  std::vector<Box> boxes_;
  std::map<int, std::set<std::vector<int64_t>>> points_;
  int64_t steps_ = 0;
};

} // namespace

std::optional<std::vector<Box>> output_boxes(const Kernel& k, const std::vector<ArgSpec>& specs,
                                             const std::vector<int>& outputs,
                                             const std::array<int64_t, 3>& block) {
  const ir::KernelNode& node = k.node();
  std::vector<ir::ArgDesc> descs;
  for (const ArgSpec& s : specs)
    descs.push_back({s.dtype, s.shape});
  ir::Binding env = ir::bind_args(node, descs);
  for (size_t i = 0; i < node.block_vars.size() && i < 3; ++i)
    env[as<ir::Variable>(node.block_vars[i])->uid] = block[i];
  Walker w(node, env, specs, outputs);
  try {
    w.walk(node.body);
    return w.boxes();
  } catch (const NotDerivable&) {
    return std::nullopt;
  }
}

} // namespace tp::ops
