// Launch-argument checks and Dim binding.
#include "ir/ArgBinding.h"

#include <sstream>

namespace tp::ir {

namespace {
std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  return os.str() + "]";
}
} // namespace

std::vector<int64_t> element_strides(const ArgDesc& a) {
  if (!a.strides.empty()) return a.strides;
  std::vector<int64_t> st(a.shape.size(), 1);
  for (int d = static_cast<int>(a.shape.size()) - 2; d >= 0; --d)
    st[d] = st[d + 1] * a.shape[d + 1];
  return st;
}

void bind_scalars(const KernelNode& k, const std::vector<double>& values, Binding& env) {
  internal_assert(values.size() == k.scalars.size()) << "scalar count";
  for (size_t i = 0; i < values.size(); ++i)
    if (k.scalars[i].dtype() == DType::i32)
      env[as<Variable>(k.scalars[i])->uid] = static_cast<int64_t>(values[i]);
}

Binding bind_args(const KernelNode& k, const std::vector<ArgDesc>& args) {
  if (args.size() != k.params.size())
    user_error() << "kernel '" << k.name << "' takes " << k.params.size() << " tensors, got "
                 << args.size();
  Binding env;
  std::map<uint64_t, std::string> bound_by;
  for (size_t i = 0; i < args.size(); ++i) {
    const Buffer& p = k.params[i];
    const ArgDesc& a = args[i];
    if (a.dtype != p->dtype)
      user_error() << "kernel '" << k.name << "': tensor '" << p->name << "' must be "
                   << dtype_name(p->dtype) << ", got " << dtype_name(a.dtype);
    if (static_cast<int>(a.shape.size()) != p->rank())
      user_error() << "kernel '" << k.name << "': tensor '" << p->name << "' must be "
                   << p->rank() << "-d, got shape " << shape_str(a.shape);
    for (int d = 0; d < p->rank(); ++d) {
      int64_t got = a.shape[d];
      if (got <= 0)
        user_error() << "kernel '" << k.name << "': tensor '" << p->name << "' has extent "
                     << got << " in dimension " << d << "; extents must be positive";
      if (const int64_t* c = p->shape[d].as_int()) {
        if (*c != got)
          user_error() << "kernel '" << k.name << "': tensor '" << p->name << "' dimension "
                       << d << " must be " << *c << ", got shape " << shape_str(a.shape);
        continue;
      }
      const auto* v = as<Variable>(p->shape[d]);
      internal_assert(v) << "parameter extent is neither constant nor a Dim";
      auto it = env.find(v->uid);
      if (it == env.end()) {
        env[v->uid] = got;
        bound_by[v->uid] = p->name;
      } else if (it->second != got) {
        user_error() << "kernel '" << k.name << "': shape mismatch: Dim " << v->name << " is "
                     << it->second << " from tensor '" << bound_by[v->uid] << "' but "
                     << got << " from tensor '" << p->name << "' (shape " << shape_str(a.shape)
                     << ")";
      }
    }
    if (!a.strides.empty() && a.strides.size() != a.shape.size())
      user_error() << "kernel '" << k.name << "': tensor '" << p->name << "' has " << a.shape.size()
                   << " dimensions but " << a.strides.size() << " strides";
    std::vector<int64_t> st = element_strides(a);
    for (size_t d = 0; d < st.size(); ++d)
      if (st[d] < 0)
        user_error() << "kernel '" << k.name << "': tensor '" << p->name << "' has stride " << st[d]
                     << " in dimension " << d << " (strides " << shape_str(st)
                     << "); strides must be non-negative";
    if (p->strides.empty()) {
      std::vector<int64_t> dense = element_strides({a.dtype, a.shape});
      bool same = true; // a unit dimension's stride does not matter (PyTorch leaves any)
      for (size_t d = 0; d < a.strides.size(); ++d)
        same &= a.shape[d] == 1 || a.strides[d] == dense[d];
      if (!same)
        user_error() << "kernel '" << k.name << "': tensor '" << p->name << "' has strides "
                     << shape_str(a.strides) << " for shape " << shape_str(a.shape)
                     << ", but the parameter is contiguous; declare it strided "
                        "(Tensor(name, shape, dtype, tp::strided)) or pass a contiguous copy";
      continue;
    }
    for (size_t d = 0; d < st.size(); ++d)
      env[as<Variable>(p->strides[d])->uid] = st[d];
  }
  for (const Var& d : k.dims)
    if (!env.count(as<Variable>(d)->uid))
      user_error() << "kernel '" << k.name << "': Dim " << d.name() << " is unbound at launch";
  return env;
}

int64_t eval_int(const Expr& e, const Binding& env) {
  if (const int64_t* c = e.as_int()) return *c;
  if (const auto* v = as<Variable>(e)) {
    auto it = env.find(v->uid);
    if (it == env.end())
      user_error() << "'" << v->name << "' is unbound: it appears in no parameter's shape";
    return it->second;
  }
  if (const auto* b = as<Binary>(e)) {
    int64_t x = eval_int(b->a, env), y = eval_int(b->b, env);
    switch (b->op) {
    case BinOp::add: return x + y;
    case BinOp::sub: return x - y;
    case BinOp::mul: return x * y;
    case BinOp::div:
      internal_assert(y != 0) << "division by zero in " << binop_name(b->op);
      return x / y;
    case BinOp::mod:
      internal_assert(y != 0) << "modulo by zero";
      return x % y;
    case BinOp::min: return std::min(x, y);
    case BinOp::max: return std::max(x, y);
    case BinOp::bit_and:
    case BinOp::bit_xor:
    case BinOp::bit_or:
    case BinOp::shl:
    case BinOp::shr:
      return bit_op32(b->op, x, y);
    case BinOp::eq: return x == y;
    case BinOp::ne: return x != y;
    case BinOp::lt: return x < y;
    case BinOp::le: return x <= y;
    case BinOp::gt: return x > y;
    case BinOp::ge: return x >= y;
    case BinOp::land: return x && y;
    case BinOp::lor: return x || y;
    }
  }
  if (const auto* s = as<Select>(e))
    return eval_int(s->cond, env) ? eval_int(s->a, env) : eval_int(s->b, env);
  internal_assert(false) << "cannot evaluate " << node_kind_name(e->kind) << " on the host";
  return 0;
}

} // namespace tp::ir
