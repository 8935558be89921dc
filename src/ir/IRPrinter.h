// Prints the IR as stable text. In canonical mode every variable and buffer is renamed by order
// of first appearance and source locations are left out, so two kernels that differ only in
// names print the same: the cache key and reproducer files are built on this text.
#pragma once
#include <map>
#include <ostream>
#include <string>

#include "ir/IRVisitor.h"

namespace tp::ir {

class IRPrinter : public IRVisitor {
public:
  explicit IRPrinter(std::ostream& os, bool canonical = false) : os_(os), canonical_(canonical) {}
  void print(const KernelNode& k);
  void print(const Stmt& s) { visit(s); }
  void print(const Expr& e) { visit(e); }

protected:
  using IRVisitor::visit;
#define TILEPILOT_X(n) void visit(const n* op) override;
  TILEPILOT_IR_EXPRS(TILEPILOT_X) TILEPILOT_IR_STMTS(TILEPILOT_X)
#undef TILEPILOT_X
  void print_region(const Region& r);
  void print_buffer_decl(const Buffer& b);
  std::string var_name(const Variable* v);
  std::string buffer_name(const Buffer& b);
  std::string unique(const std::string& base, uint64_t uid, std::map<uint64_t, std::string>& m,
                     const char* canon_prefix);
  void indent();
  void body(const Stmt& s); // prints " {\n" body "}\n"

  std::ostream& os_;
  bool canonical_;
  int indent_ = 0;
  std::map<uint64_t, std::string> var_names_, buffer_names_;
  std::map<std::string, int> used_;
};

std::string to_string(const Expr& e);
std::string to_string(const Stmt& s);
std::string to_string(const KernelNode& k, bool canonical = false);

} // namespace tp::ir
