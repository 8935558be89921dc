// Node factories: type promotion and constant folding happen here, so every builder and pass
// produces the same canonical nodes.
#include "ir/IR.h"

#include <atomic>
#include <cmath>

namespace tp::ir {

namespace {
std::atomic<uint64_t> next_uid{1};
} // namespace

uint64_t fresh_uid() {
  return next_uid.fetch_add(1);
}

const char* node_kind_name(NodeKind k) {
  switch (k) {
#define TILEPILOT_X(n)                                                                             \
  case NodeKind::n:                                                                                \
    return #n;
    TILEPILOT_IR_EXPRS(TILEPILOT_X) TILEPILOT_IR_STMTS(TILEPILOT_X)
#undef TILEPILOT_X
  }
  return "?";
}

const char* scope_name(Scope s) {
  switch (s) {
  case Scope::global:
    return "global";
  case Scope::shared:
    return "shared";
  case Scope::fragment:
    return "fragment";
  case Scope::local:
    return "local";
  }
  return "?";
}

std::vector<int64_t> BufferNode::const_shape() const {
  std::vector<int64_t> out;
  for (const Expr& e : shape) {
    const int64_t* v = e.as_int();
    internal_assert(v) << "buffer " << name << " has a symbolic extent";
    out.push_back(*v);
  }
  return out;
}

int64_t BufferNode::const_elements() const {
  int64_t n = 1;
  for (int64_t e : const_shape())
    n *= e;
  return n;
}

Buffer make_buffer(std::string name, Scope scope, DType dtype, std::vector<Expr> shape,
                   uint64_t kernel_uid, SourceLoc loc) {
  auto b = std::make_shared<BufferNode>();
  b->name = std::move(name);
  b->uid = fresh_uid();
  b->scope = scope;
  b->dtype = dtype;
  b->shape = std::move(shape);
  b->kernel_uid = kernel_uid;
  b->loc = std::move(loc);
  return b;
}

std::vector<int64_t> Region::squeezed() const {
  std::vector<int64_t> out;
  for (int64_t e : extent)
    if (e != 1) out.push_back(e);
  return out;
}

int64_t Region::elements() const {
  int64_t n = 1;
  for (int64_t e : extent)
    n *= e;
  return n;
}

Region whole(const Buffer& b) {
  Region r;
  r.buffer = b;
  r.extent = b->const_shape();
  r.min.assign(r.extent.size(), IntImm::make(0));
  return r;
}

bool is_whole(const Region& r) {
  if (r.buffer->scope == Scope::global || r.extent != r.buffer->const_shape()) return false;
  for (const Expr& m : r.min)
    if (!m.as_int() || *m.as_int() != 0) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------

Expr IntImm::make(int64_t v) {
  return Expr(std::make_shared<IntImm>(v));
}
Expr FloatImm::make(double v, DType t) {
  return Expr(std::make_shared<FloatImm>(v, t));
}
Var Variable::make(const std::string& name, DType t) {
  return Var(std::make_shared<Variable>(name, fresh_uid(), t));
}

DType compute_type(DType t) {
  if (is_float(t)) return DType::f32;
  if (is_int(t)) return DType::i32;
  return t;
}

const char* binop_name(BinOp op) {
  switch (op) {
  case BinOp::add:
    return "+";
  case BinOp::sub:
    return "-";
  case BinOp::mul:
    return "*";
  case BinOp::div:
    return "/";
  case BinOp::mod:
    return "%";
  case BinOp::min:
    return "min";
  case BinOp::max:
    return "max";
  case BinOp::bit_and:
    return "&";
  case BinOp::bit_xor:
    return "^";
  case BinOp::shl:
    return "<<";
  case BinOp::shr:
    return ">>";
  case BinOp::eq:
    return "==";
  case BinOp::ne:
    return "!=";
  case BinOp::lt:
    return "<";
  case BinOp::le:
    return "<=";
  case BinOp::gt:
    return ">";
  case BinOp::ge:
    return ">=";
  case BinOp::land:
    return "&&";
  case BinOp::lor:
    return "||";
  case BinOp::bit_or:
    return "|";
  }
  return "?";
}

bool binop_is_compare(BinOp op) {
  return op >= BinOp::eq && op <= BinOp::lor;
}
bool binop_is_bitwise(BinOp op) {
  return op == BinOp::bit_and || op == BinOp::bit_xor || op == BinOp::bit_or || op == BinOp::shl ||
         op == BinOp::shr;
}

namespace {

bool is_float_t(DType t) {
  return is_float(t);
}

} // namespace

int64_t bit_op32(BinOp op, int64_t a, int64_t b) {
  auto x = static_cast<uint32_t>(a), y = static_cast<uint32_t>(b);
  uint32_t r = 0;
  switch (op) {
  case BinOp::bit_and:
    r = x & y;
    break;
  case BinOp::bit_xor:
    r = x ^ y;
    break;
  case BinOp::bit_or:
    r = x | y;
    break;
  case BinOp::shl:
    r = x << (y & 31);
    break;
  case BinOp::shr:
    return static_cast<int32_t>(x) >> (y & 31); // arithmetic
  default:
    internal_assert(false) << binop_name(op) << " is not a bit op";
  }
  return static_cast<int32_t>(r);
}

namespace {

int64_t fold_int(BinOp op, int64_t a, int64_t b) {
  switch (op) {
  case BinOp::add:
    return a + b;
  case BinOp::sub:
    return a - b;
  case BinOp::mul:
    return a * b;
  case BinOp::div:
    return a / b;
  case BinOp::mod:
    return a % b;
  case BinOp::min:
    return std::min(a, b);
  case BinOp::max:
    return std::max(a, b);
  case BinOp::bit_and:
  case BinOp::bit_xor:
  case BinOp::bit_or:
  case BinOp::shl:
  case BinOp::shr:
    return bit_op32(op, a, b);
  case BinOp::eq:
    return a == b;
  case BinOp::ne:
    return a != b;
  case BinOp::lt:
    return a < b;
  case BinOp::le:
    return a <= b;
  case BinOp::gt:
    return a > b;
  case BinOp::ge:
    return a >= b;
  case BinOp::land:
    return a && b;
  case BinOp::lor:
    return a || b;
  }
  return 0;
}

} // namespace

Expr Binary::make(BinOp op, Expr a, Expr b) {
  internal_assert(a.defined() && b.defined()) << "undefined operand of " << binop_name(op);
  DType ta = compute_type(a.dtype()), tb = compute_type(b.dtype());
  bool fl = is_float_t(ta) || is_float_t(tb);
  DType t;
  if (binop_is_compare(op))
    t = DType::boolean;
  else if (op == BinOp::land || op == BinOp::lor)
    t = DType::boolean;
  else
    t = fl ? DType::f32 : DType::i32;

  const int64_t* ia = a.as_int();
  const int64_t* ib = b.as_int();
  if (ia && ib && !((op == BinOp::div || op == BinOp::mod) && *ib == 0)) {
    int64_t v = fold_int(op, *ia, *ib);
    return t == DType::boolean ? Expr(std::make_shared<IntImm>(v, DType::boolean))
                               : IntImm::make(v);
  }
  // Identities that keep index arithmetic readable; never change a float result's rounding.
  if (!fl && !binop_is_compare(op)) {
    if (op == BinOp::add && ia && *ia == 0) return b;
    if ((op == BinOp::add || op == BinOp::sub) && ib && *ib == 0) return a;
    if (op == BinOp::mul && ia && *ia == 1) return b;
    if ((op == BinOp::mul || op == BinOp::div) && ib && *ib == 1) return a;
    if (op == BinOp::mul && ((ia && *ia == 0) || (ib && *ib == 0))) return IntImm::make(0);
    // (x + c1) +- c2 -> x + (c1 +- c2): keeps ceildiv(N, 128) reading as (N + 127) / 128.
    if ((op == BinOp::add || op == BinOp::sub) && ib) {
      if (const auto* inner = as<Binary>(a); inner && inner->op == BinOp::add) {
        if (const int64_t* c1 = inner->b.as_int()) {
          int64_t c = op == BinOp::add ? *c1 + *ib : *c1 - *ib;
          return Binary::make(BinOp::add, inner->a, IntImm::make(c));
        }
      }
    }
  }
  return Expr(std::make_shared<Binary>(op, std::move(a), std::move(b), t));
}

const char* callop_name(CallOp op) {
  switch (op) {
  case CallOp::neg:
    return "neg";
  case CallOp::lnot:
    return "not";
  case CallOp::abs:
    return "abs";
  case CallOp::exp:
    return "exp";
  case CallOp::exp2:
    return "exp2";
  case CallOp::log:
    return "log";
  case CallOp::log2:
    return "log2";
  case CallOp::sqrt:
    return "sqrt";
  case CallOp::rsqrt:
    return "rsqrt";
  case CallOp::bit_not:
    return "~";
  case CallOp::tanh:
    return "tanh";
  case CallOp::erf:
    return "erf";
  case CallOp::sigmoid:
    return "sigmoid";
  case CallOp::pow:
    return "pow";
  case CallOp::bits_to_f32:
    return "bitcast_f32";
  case CallOp::f32_to_bits:
    return "bitcast_i32";
  }
  return "?";
}

Expr Call::make(CallOp op, std::vector<Expr> args) {
  internal_assert(args.size() == (op == CallOp::pow ? 2u : 1u))
      << callop_name(op) << " takes " << (op == CallOp::pow ? "two arguments" : "one argument");
  DType t0 = compute_type(args[0].dtype());
  DType t;
  switch (op) {
  case CallOp::neg:
    if (const int64_t* v = args[0].as_int()) return IntImm::make(-*v);
    if (const auto* f = as<FloatImm>(args[0])) return FloatImm::make(-f->value, f->dtype);
    [[fallthrough]];
  case CallOp::abs:
    t = is_float(t0) ? DType::f32 : DType::i32;
    break;
  case CallOp::lnot:
    t = DType::boolean;
    break;
  case CallOp::f32_to_bits:
    t = DType::i32;
    break;
  case CallOp::bit_not:
    if (const int64_t* v = args[0].as_int()) return IntImm::make(~*v);
    t = DType::i32;
    break;
  default:
    t = DType::f32;
    break;
  }
  return Expr(std::make_shared<Call>(op, std::move(args), t));
}

Expr Select::make(Expr c, Expr a, Expr b) {
  DType ta = compute_type(a.dtype()), tb = compute_type(b.dtype());
  DType t = (is_float(ta) || is_float(tb)) ? DType::f32 : ta;
  return Expr(std::make_shared<Select>(std::move(c), std::move(a), std::move(b), t));
}

Expr Cast::make(DType t, Expr v) {
  if (v.dtype() == t) return v;
  if (const int64_t* i = v.as_int(); i && t == DType::i32) return v;
  return Expr(std::make_shared<Cast>(std::move(v), t));
}

Expr Load::make(Buffer b, std::vector<Expr> indices) {
  DType t = b->dtype;
  return Expr(std::make_shared<Load>(std::move(b), std::move(indices), t));
}

Expr Intrinsic::make(std::string name, std::vector<Expr> args, DType t, std::vector<Buffer> buffers,
                     bool pure) {
  return Expr(
      std::make_shared<Intrinsic>(std::move(name), std::move(args), std::move(buffers), t, pure));
}

// ---------------------------------------------------------------------------------------------

Stmt Seq::make(std::vector<Stmt> stmts, SourceLoc loc) {
  return std::make_shared<Seq>(std::move(stmts), std::move(loc));
}
const char* for_kind_name(ForKind k) {
  switch (k) {
  case ForKind::serial:
    return "serial";
  case ForKind::unrolled:
    return "unrolled";
  case ForKind::pipelined:
    return "pipelined";
  }
  return "?";
}
const char* copy_engine_name(CopyEngine e) {
  switch (e) {
  case CopyEngine::automatic:
    return "automatic";
  case CopyEngine::tma:
    return "tma";
  case CopyEngine::cp_async:
    return "cp_async";
  }
  return "?";
}
Stmt For::make(Var v, Expr min, Expr extent, ForKind k, LoopSchedule schedule, Stmt body,
               SourceLoc loc) {
  return std::make_shared<For>(std::move(v), std::move(min), std::move(extent), k, schedule,
                               std::move(body), std::move(loc));
}
Stmt Parallel::make(std::vector<Var> vars, std::vector<int64_t> extents, Stmt body, SourceLoc loc) {
  return std::make_shared<Parallel>(std::move(vars), std::move(extents), std::move(body),
                                    std::move(loc));
}
Stmt IfThenElse::make(Expr c, Stmt t, Stmt e, SourceLoc loc) {
  return std::make_shared<IfThenElse>(std::move(c), std::move(t), std::move(e), std::move(loc));
}
Stmt Store::make(Buffer b, std::vector<Expr> indices, Expr value, SourceLoc loc) {
  return std::make_shared<Store>(std::move(b), std::move(indices), std::move(value),
                                 std::move(loc));
}
Stmt Allocate::make(Buffer b, SourceLoc loc) {
  return std::make_shared<Allocate>(std::move(b), std::move(loc));
}
Stmt Copy::make(Region src, Region dst, SourceLoc loc) {
  return std::make_shared<Copy>(std::move(src), std::move(dst), std::move(loc));
}
Stmt Gemm::make(Region a, Region b, Region c, bool trans_a, bool trans_b, bool clear,
                SourceLoc loc) {
  return std::make_shared<Gemm>(std::move(a), std::move(b), std::move(c), trans_a, trans_b, clear,
                                std::move(loc));
}
Stmt Fill::make(Region dst, Expr value, SourceLoc loc) {
  return std::make_shared<Fill>(std::move(dst), std::move(value), std::move(loc));
}
const char* reduce_op_name(ReduceOp op) {
  switch (op) {
  case ReduceOp::max:
    return "max";
  case ReduceOp::min:
    return "min";
  case ReduceOp::sum:
    return "sum";
  case ReduceOp::absmax:
    return "absmax";
  }
  return "?";
}
Stmt Reduce::make(ReduceOp op, Buffer src, Buffer dst, int dim, bool clear, SourceLoc loc) {
  return std::make_shared<Reduce>(op, std::move(src), std::move(dst), dim, clear, std::move(loc));
}
Stmt AtomicAdd::make(Buffer b, std::vector<Expr> indices, Expr value, SourceLoc loc) {
  return std::make_shared<AtomicAdd>(std::move(b), std::move(indices), std::move(value),
                                     std::move(loc));
}
Stmt Print::make(std::string label, Expr value, Buffer tile, SourceLoc loc) {
  return std::make_shared<Print>(std::move(label), std::move(value), std::move(tile),
                                 std::move(loc));
}

Stmt Let::make(Var v, Expr value, Stmt body, SourceLoc loc) {
  return std::make_shared<Let>(std::move(v), std::move(value), std::move(body), std::move(loc));
}
Stmt Evaluate::make(Expr v, SourceLoc loc) {
  return std::make_shared<Evaluate>(std::move(v), std::move(loc));
}

std::vector<ParamRef> KernelNode::launch_order() const {
  if (!order.empty()) return order;
  std::vector<ParamRef> out;
  for (size_t i = 0; i < params.size(); ++i)
    out.push_back({false, static_cast<int>(i)});
  return out;
}

bool KernelNode::has_strided() const {
  for (const Buffer& b : params)
    if (!b->strides.empty()) return true;
  return false;
}

} // namespace tp::ir

// ---------------------------------------------------------------------------------------------
// The public Expr handle's members.
namespace tp {

Expr Expr::make_int(int64_t v) {
  return ir::IntImm::make(v);
}
Expr Expr::make_float(double v) {
  return ir::FloatImm::make(v);
}
DType Expr::dtype() const {
  internal_assert(defined()) << "dtype of an undefined expression";
  return node_->dtype;
}
const int64_t* Expr::as_int() const {
  if (const auto* i = ir::as<ir::IntImm>(*this); i && i->dtype == DType::i32) return &i->value;
  return nullptr;
}
Var::Var(const std::string& name, DType t) : Var(ir::Variable::make(name, t)) {}
const std::string& Var::name() const {
  return ir::as<ir::Variable>(*this)->name;
}

} // namespace tp
