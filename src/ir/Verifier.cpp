// The kernel verifier.
#include "ir/Verifier.h"

#include <set>

#include "ir/IRVisitor.h"
#include "ir/ScheduleRules.h"

namespace tp::ir {

namespace {

class Verifier : public IRVisitor {
public:
  explicit Verifier(const KernelNode& k) : k_(k) {
    for (const Var& d : k.dims) bound_.insert(as<Variable>(d)->uid);
    for (const Var& b : k.block_vars) bound_.insert(as<Variable>(b)->uid);
    for (const Var& v : k.scalars)
      bound_.insert(as<Variable>(v)->uid);
    for (const Buffer& p : k.params)
      for (const Expr& st : p->strides)
        bound_.insert(as<Variable>(st)->uid);
    for (const Buffer& p : k.params) {
      if (p->rank() > kMaxRank)
        user_error(k.loc) << "kernel '" << k.name << "': tensor '" << p->name << "' has "
                          << p->rank() << " dimensions; tensors have at most " << kMaxRank;
      live_.push_back({p->uid});
    }
    live_.push_back({});
  }

  void run() {
    loc_ = k_.loc;
    for (const Expr& g : k_.grid) visit(g);
    visit(k_.body);
  }

protected:
  using IRVisitor::visit;

  void visit(const Variable* op) override {
    if (bound_.count(op->uid)) return;
    if (let_ended_.count(op->uid))
      user_error(loc_) << "kernel '" << k_.name << "': '" << op->name
                       << "' is used outside the scope of the let that defined it; a let's "
                          "Var is valid until the end of the scope (loop, branch, parallel "
                          "or kernel body) where let was called";
    user_error(loc_) << "kernel '" << k_.name << "': '" << op->name
                     << "' is not bound: it is neither a block index, a loop variable, nor a "
                        "Dim that appears in some parameter's shape (Dims are bound at launch "
                        "from the tensors' shapes); add it to a tensor's shape or use a constant";
  }

  void check_buffer(const Buffer& b, bool element) {
    bool found = false;
    for (const auto& scope : live_)
      if (scope.count(b->uid)) found = true;
    if (!found)
      user_error(loc_) << "tile '" << b->name << "' (allocated at " << b->loc.str()
                       << ") is used outside the scope that allocated it";
    if (element && b->scope == Scope::fragment && parallel_depth_ == 0)
      user_error(loc_) << "fragment '" << b->name
                       << "' indexed outside parallel: fragment elements can only be accessed "
                          "inside parallel(...)";
  }

  void visit(const Load* op) override {
    check_buffer(op->buffer, true);
    IRVisitor::visit(op);
  }
  void visit(const Binary* op) override {
    if (binop_is_bitwise(op->op)) check_bit_operand(binop_name(op->op), {op->a, op->b});
    IRVisitor::visit(op);
  }
  void visit(const Call* op) override {
    if (op->op == CallOp::bit_not) check_bit_operand("~", op->args);
    IRVisitor::visit(op);
  }

  void check_bit_operand(const char* name, const std::vector<Expr>& args) {
    for (const Expr& a : args)
      if (is_float(a.dtype()))
        user_error(loc_) << "kernel '" << k_.name << "': bit operator '" << name << "' on an "
                         << dtype_name(a.dtype())
                         << " value; bit operators take integer operands (i32, i8, u8, int4): "
                            "convert with cast(i32, x) first";
  }

  /// int4 elements share bytes: writes from different threads would race on the byte.
  void check_not_int4(const Buffer& b, const char* what) {
    if (b->dtype == DType::int4)
      user_error(loc_) << "kernel '" << k_.name << "': " << what << " '" << b->name
                       << "' is int4; int4 is read-only in kernels (two elements share a byte): "
                          "declare the tensor u8 and store pack_int4(lo, hi)";
  }
  void visit(const Region& r) override {
    check_buffer(r.buffer, false);
    IRVisitor::visit(r);
  }

  void stmt(const StmtNode* s) {
    if (s->loc.known()) loc_ = s->loc;
  }

  void visit(const Seq* op) override {
    live_.push_back({});
    for (const Stmt& s : op->stmts) visit(s);
    live_.pop_back();
  }
  void visit(const Allocate* op) override {
    stmt(op);
    check_not_int4(op->buffer, "tile");
    live_.back().insert(op->buffer->uid);
  }
  void visit(const For* op) override {
    stmt(op);
    if (op->for_kind == ForKind::pipelined) verify_schedule(k_, op);
    visit(op->min);
    visit(op->extent);
    bound_.insert(as<Variable>(op->var)->uid);
    scoped_body(op->body);
  }
  void visit(const Let* op) override {
    stmt(op);
    visit(op->value);
    uint64_t uid = as<Variable>(op->var)->uid;
    bound_.insert(uid);
    scoped_body(op->body);
    bound_.erase(uid);
    let_ended_.insert(uid);
  }
  void visit(const Parallel* op) override {
    stmt(op);
    for (const Var& v : op->vars) bound_.insert(as<Variable>(v)->uid);
    ++parallel_depth_;
    scoped_body(op->body);
    --parallel_depth_;
  }
  void visit(const IfThenElse* op) override {
    stmt(op);
    visit(op->cond);
    scoped_body(op->then_case);
    scoped_body(op->else_case);
  }
  void visit(const Store* op) override {
    stmt(op);
    check_buffer(op->buffer, true);
    check_not_int4(op->buffer, "store to");
    IRVisitor::visit(op);
  }
  void visit(const AtomicAdd* op) override {
    stmt(op);
    check_buffer(op->buffer, true);
    check_not_int4(op->buffer, "atomic_add to");
    IRVisitor::visit(op);
  }
  void visit(const Copy* op) override {
    stmt(op);
    check_not_int4(op->dst.buffer, "copy to");
    visit(op->src);
    visit(op->dst);
  }
  void visit(const Gemm* op) override {
    stmt(op);
    visit(op->a);
    visit(op->b);
    visit(op->c);
  }
  void visit(const Fill* op) override {
    stmt(op);
    check_not_int4(op->dst.buffer, "fill of");
    visit(op->dst);
    visit(op->value);
  }
  void visit(const Reduce* op) override {
    stmt(op);
    check_buffer(op->src, false);
    check_buffer(op->dst, false);
  }
  void visit(const Print* op) override {
    stmt(op);
    if (op->tile) check_buffer(op->tile, false);
    visit(op->value);
  }

private:
  void scoped_body(const Stmt& s) {
    if (!s.defined()) return;
    live_.push_back({});
    visit(s);
    live_.pop_back();
  }

  const KernelNode& k_;
  std::set<uint64_t> bound_;
  std::set<uint64_t> let_ended_; // variables of lets whose scope has closed
  std::vector<std::set<uint64_t>> live_;
  int parallel_depth_ = 0;
  SourceLoc loc_;
};

} // namespace

void verify(const KernelNode& k) { Verifier(k).run(); }

} // namespace tp::ir
