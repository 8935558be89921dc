// The IR printer. Binary operations are fully parenthesised so the text is unambiguous.
#include "ir/IRPrinter.h"

#include <cmath>
#include <fmt/format.h>
#include <sstream>

namespace tp::ir {

std::string IRPrinter::unique(const std::string& base, uint64_t uid,
                              std::map<uint64_t, std::string>& m, const char* canon_prefix) {
  auto it = m.find(uid);
  if (it != m.end()) return it->second;
  std::string name;
  if (canonical_) {
    name = fmt::format("{}{}", canon_prefix, m.size());
  } else {
    int& n = used_[base];
    name = n == 0 ? base : fmt::format("{}_{}", base, n);
    ++n;
  }
  m[uid] = name;
  return name;
}

std::string IRPrinter::var_name(const Variable* v) {
  return unique(v->name, v->uid, var_names_, "v");
}
std::string IRPrinter::buffer_name(const Buffer& b) {
  return unique(b->name, b->uid, buffer_names_, b->scope == Scope::global ? "p" : "t");
}

void IRPrinter::indent() {
  for (int i = 0; i < indent_; ++i)
    os_ << "  ";
}

void IRPrinter::body(const Stmt& s) {
  os_ << " {\n";
  ++indent_;
  if (const auto* q = as<Seq>(s))
    for (const Stmt& c : q->stmts)
      visit(c);
  else
    visit(s);
  --indent_;
  indent();
  os_ << "}\n";
}

void IRPrinter::print_buffer_decl(const Buffer& b) {
  os_ << dtype_name(b->dtype) << "[";
  for (int i = 0; i < b->rank(); ++i) {
    if (i) os_ << ", ";
    visit(b->shape[i]);
  }
  os_ << "]";
}

void IRPrinter::print(const KernelNode& k) {
  os_ << "kernel " << (canonical_ ? std::string("k") : k.name) << "(";
  // Dims first so that canonical names follow the parameter order.
  for (const Var& d : k.dims)
    var_name(as<Variable>(d));
  std::vector<ParamRef> order = k.launch_order();
  for (size_t i = 0; i < order.size(); ++i) {
    if (i) os_ << ", ";
    if (order[i].scalar) {
      const Var& v = k.scalars[order[i].index];
      os_ << var_name(as<Variable>(v)) << ": " << dtype_name(v.dtype());
      continue;
    }
    const Buffer& b = k.params[order[i].index];
    os_ << buffer_name(b) << ": ";
    print_buffer_decl(b);
    if (!b->strides.empty()) {
      os_ << " strides(";
      for (size_t d = 0; d < b->strides.size(); ++d) {
        if (d) os_ << ", ";
        visit(b->strides[d]);
      }
      os_ << ")";
    }
  }
  os_ << ") grid(";
  for (size_t i = 0; i < k.grid.size(); ++i) {
    if (i) os_ << ", ";
    visit(k.grid[i]);
  }
  os_ << ") threads(" << k.threads << ")";
  if (k.smem_limit) os_ << " smem_limit(" << k.smem_limit << ")";
  if (k.blocks_per_sm != 1) os_ << " blocks_per_sm(" << k.blocks_per_sm << ")";
  for (const auto& [key, v] : k.attrs)
    os_ << " @" << key << "(" << v << ")";
  os_ << " blocks(";
  for (size_t i = 0; i < k.block_vars.size(); ++i) {
    if (i) os_ << ", ";
    os_ << var_name(as<Variable>(k.block_vars[i]));
  }
  os_ << ")";
  body(k.body);
}

void IRPrinter::visit(const IntImm* op) {
  if (op->dtype == DType::boolean)
    os_ << (op->value ? "true" : "false");
  else
    os_ << op->value;
}

void IRPrinter::visit(const FloatImm* op) {
  if (std::isinf(op->value))
    os_ << (op->value > 0 ? "inf" : "-inf");
  else if (std::isnan(op->value))
    os_ << "nan";
  else
    os_ << fmt::format("{}", op->value) << (op->value == std::floor(op->value) ? ".0" : "");
  if (op->dtype != DType::f32) os_ << dtype_name(op->dtype);
}

void IRPrinter::visit(const Variable* op) {
  os_ << var_name(op);
}

void IRPrinter::visit(const Binary* op) {
  if (op->op == BinOp::min || op->op == BinOp::max) {
    os_ << binop_name(op->op) << "(";
    visit(op->a);
    os_ << ", ";
    visit(op->b);
    os_ << ")";
    return;
  }
  os_ << "(";
  visit(op->a);
  os_ << " " << binop_name(op->op) << " ";
  visit(op->b);
  os_ << ")";
}

void IRPrinter::visit(const Call* op) {
  os_ << callop_name(op->op) << "(";
  for (size_t i = 0; i < op->args.size(); ++i) {
    if (i) os_ << ", ";
    visit(op->args[i]);
  }
  os_ << ")";
}

void IRPrinter::visit(const Select* op) {
  os_ << "select(";
  visit(op->cond);
  os_ << ", ";
  visit(op->a);
  os_ << ", ";
  visit(op->b);
  os_ << ")";
}

void IRPrinter::visit(const Cast* op) {
  os_ << dtype_name(op->dtype) << "(";
  visit(op->value);
  os_ << ")";
}

void IRPrinter::visit(const Load* op) {
  os_ << buffer_name(op->buffer) << "[";
  for (size_t i = 0; i < op->indices.size(); ++i) {
    if (i) os_ << ", ";
    visit(op->indices[i]);
  }
  os_ << "]";
}

void IRPrinter::visit(const Intrinsic* op) {
  os_ << op->name << "(";
  for (size_t i = 0; i < op->buffers.size(); ++i)
    os_ << (i ? ", " : "") << buffer_name(op->buffers[i]);
  for (size_t i = 0; i < op->args.size(); ++i) {
    if (i || !op->buffers.empty()) os_ << ", ";
    visit(op->args[i]);
  }
  os_ << ")";
}

void IRPrinter::visit(const Let* op) {
  indent();
  os_ << "let " << var_name(as<Variable>(op->var)) << " = ";
  visit(op->value);
  os_ << "\n";
  visit(op->body);
}

void IRPrinter::visit(const Evaluate* op) {
  indent();
  visit(op->value);
  os_ << "\n";
}

void IRPrinter::print_region(const Region& r) {
  os_ << buffer_name(r.buffer) << "[";
  for (size_t i = 0; i < r.min.size(); ++i) {
    if (i) os_ << ", ";
    visit(r.min[i]);
    os_ << " +: " << r.extent[i];
  }
  os_ << "]";
}

void IRPrinter::visit(const Seq* op) {
  for (const Stmt& s : op->stmts)
    visit(s);
}

void IRPrinter::visit(const For* op) {
  indent();
  os_ << "for " << var_name(as<Variable>(op->var)) << " in " << for_kind_name(op->for_kind) << "(";
  visit(op->min);
  os_ << ", ";
  visit(op->extent);
  if (op->for_kind == ForKind::pipelined) {
    const LoopSchedule& sc = op->schedule;
    os_ << ", stages=" << sc.stages;
    if (sc.copies != CopyEngine::automatic) os_ << ", copies=" << copy_engine_name(sc.copies);
    if (sc.defer_last_gemm) os_ << ", defer_last_gemm";
    if (sc.pingpong) os_ << ", pingpong";
  }
  os_ << ")";
  body(op->body);
}

void IRPrinter::visit(const Parallel* op) {
  indent();
  os_ << "parallel (";
  for (size_t i = 0; i < op->vars.size(); ++i) {
    if (i) os_ << ", ";
    os_ << var_name(as<Variable>(op->vars[i])) << " < " << op->extents[i];
  }
  os_ << ")";
  body(op->body);
}

void IRPrinter::visit(const IfThenElse* op) {
  indent();
  os_ << "if (";
  visit(op->cond);
  os_ << ")";
  body(op->then_case);
  if (op->else_case.defined()) {
    indent();
    os_ << "else";
    body(op->else_case);
  }
}

void IRPrinter::visit(const Store* op) {
  indent();
  os_ << buffer_name(op->buffer) << "[";
  for (size_t i = 0; i < op->indices.size(); ++i) {
    if (i) os_ << ", ";
    visit(op->indices[i]);
  }
  os_ << "] = ";
  visit(op->value);
  os_ << "\n";
}

void IRPrinter::visit(const Allocate* op) {
  indent();
  os_ << scope_name(op->buffer->scope) << " " << buffer_name(op->buffer) << ": ";
  print_buffer_decl(op->buffer);
  os_ << "\n";
}

void IRPrinter::visit(const Copy* op) {
  indent();
  os_ << "copy(";
  print_region(op->src);
  os_ << " -> ";
  print_region(op->dst);
  os_ << ")\n";
}

void IRPrinter::visit(const Gemm* op) {
  indent();
  os_ << "gemm(";
  print_region(op->a);
  os_ << (op->trans_a ? "^T" : "") << ", ";
  print_region(op->b);
  os_ << (op->trans_b ? "^T" : "") << ", ";
  print_region(op->c);
  os_ << (op->clear ? ", clear" : "") << ")\n";
}

void IRPrinter::visit(const Fill* op) {
  indent();
  os_ << "fill(";
  print_region(op->dst);
  os_ << ", ";
  visit(op->value);
  os_ << ")\n";
}

void IRPrinter::visit(const Reduce* op) {
  indent();
  os_ << "reduce_" << reduce_op_name(op->op) << "(" << buffer_name(op->src) << " -> "
      << buffer_name(op->dst) << ", dim=" << op->dim << (op->clear ? ", clear" : "") << ")\n";
}

void IRPrinter::visit(const AtomicAdd* op) {
  indent();
  os_ << "atomic_add(" << buffer_name(op->buffer) << "[";
  for (size_t i = 0; i < op->indices.size(); ++i) {
    if (i) os_ << ", ";
    visit(op->indices[i]);
  }
  os_ << "], ";
  visit(op->value);
  os_ << ")\n";
}

void IRPrinter::visit(const Print* op) {
  indent();
  os_ << "print(\"" << op->label << "\", ";
  if (op->tile)
    os_ << buffer_name(op->tile);
  else
    visit(op->value);
  os_ << ")\n";
}

std::string to_string(const Expr& e) {
  std::ostringstream ss;
  IRPrinter(ss).print(e);
  return ss.str();
}
std::string to_string(const Stmt& s) {
  std::ostringstream ss;
  IRPrinter(ss).print(s);
  return ss.str();
}
std::string to_string(const KernelNode& k, bool canonical) {
  std::ostringstream ss;
  IRPrinter(ss, canonical).print(k);
  return ss.str();
}

} // namespace tp::ir
