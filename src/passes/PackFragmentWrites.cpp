#include "passes/PackFragmentWrites.h"

#include "ir/IRVisitor.h"
#include "passes/BufferAccesses.h"
#include "passes/PackedProducts.h"

namespace tp::passes {

namespace {

/// Peels lets down to one store into `regs` (the fragment's register array), substituting each
/// let's value into everything below it (so that the write can be instantiated for two registers).
/// A let without a body binds its variable for the statements after it in its Seq (FlattenLets).
/// Returns why the body is not of that form ("" when it is).
std::string match(const ir::Stmt& s, const ir::Buffer& regs, std::map<uint64_t, Expr>& lets,
                  const ir::Store*& store) {
  if (!s.defined()) return "";
  if (const auto* l = ir::as<ir::Let>(s)) {
    lets[ir::as<ir::Variable>(l->var)->uid] = substitute(l->value, lets);
    return match(l->body, regs, lets, store);
  }
  if (const auto* q = ir::as<ir::Seq>(s)) {
    for (const ir::Stmt& x : q->stmts)
      if (std::string why = match(x, regs, lets, store); !why.empty()) return why;
    return "";
  }
  const auto* st = ir::as<ir::Store>(s);
  if (!st)
    return std::string("the body has statements other than lets and one write (") +
           ir::node_kind_name(s->kind) + ")";
  if (st->buffer->uid != regs->uid)
    return "the loop writes '" + st->buffer->name + "', not only the fragment";
  if (store) return "the body writes the fragment more than once";
  store = st;
  return "";
}

} // namespace

ir::Stmt pack_fragment_writes(LowerContext& cx, const ir::Buffer& anchor, const Var& r,
                              const ir::Stmt& body, const SourceLoc& loc) {
  const DType t = anchor->dtype;
  if (t != DType::bf16 && t != DType::f16) return {};
  const FragmentLayout& l = cx.layouts.fragment(anchor);
  if (!l.adjacent_column_pairs()) return {};
  const std::string where =
      "parallel loop over '" + anchor->name + "'" + (loc.known() ? " at " + loc.str() : "");
  std::map<uint64_t, Expr> lets;
  const ir::Store* store = nullptr;
  const ir::Buffer& regs = cx.reg(anchor); // what the lowered body writes
  std::string why = match(body, regs, lets, store);
  if (why.empty() && !store) why = "the body writes nothing";
  const uint64_t rid = ir::as<ir::Variable>(r)->uid;
  std::vector<Expr> index;
  Expr value;
  if (why.empty()) {
    for (const Expr& i : store->indices)
      index.push_back(substitute(i, lets));
    value = substitute(store->value, lets);
    // The conversion to the fragment's type is the write's own: the packed word rounds the same.
    if (const auto* c = ir::as<ir::Cast>(value); c && c->dtype == t) value = c->value;
    // Register r's element, and no other thread's or loop's: its indices use r alone.
    VarUses uses;
    for (const Expr& i : index)
      uses.visit(i);
    if (uses.uids.size() != 1 || !uses.uids.count(rid))
      why = "the write's register is not named by the loop's register variable alone";
    else if (value.dtype() != DType::f32)
      why = std::string("the value is ") + dtype_name(value.dtype()) + ", not f32";
    else if (buffer_accesses(ir::Evaluate::make(value)).reads.count(regs->uid))
      why = "the value reads the fragment it writes";
  }
  Var q("q");
  std::vector<Expr> words;
  if (why.empty()) {
    std::map<uint64_t, Expr> at0{{rid, q * 2}}, at1{{rid, q * 2 + 1}};
    words = packed_words(t, {substitute(value, at0), substitute(value, at1)}, {});
    if (words.size() != 1) why = "the values are not packed products";
  }
  if (!why.empty()) {
    cx.write_notes.push_back(where + ": register writes, not packed: " + why);
    return {};
  }
  cx.write_notes.push_back(where + ": register writes packed (two adjacent columns a word)");
  const std::string type = t == DType::bf16 ? "tp::bf16" : "tp::half";
  Var w("packed");
  auto at = [&](const Expr& reg) {
    std::vector<Expr> out;
    for (const Expr& i : index)
      out.push_back(substitute(i, {{rid, reg}}));
    return out;
  };
  ir::Stmt halves = seq(
      {ir::Store::make(regs, at(q * 2), call_expr("tp::cg::low_half<" + type + ">", {w}, t), {}),
       ir::Store::make(regs, at(q * 2 + 1), call_expr("tp::cg::high_half<" + type + ">", {w}, t),
                       {})});
  return unrolled_for(q, l.regs_per_thread() / 2, ir::Let::make(w, words[0], halves));
}

} // namespace tp::passes
