// Compiled statements of the CPU interpreter.
#pragma once
#include <ostream>

#include "codegen/cpu/Machine.h"

namespace tp::cpu {

class CStmt {
public:
  virtual ~CStmt() = default;
  virtual void exec(Ctx& c) = 0;
};

struct CompileEnv {
  Layout lay;
  std::ostream* print_out = nullptr;
};

std::unique_ptr<CStmt> compile_stmt(const ir::Stmt& s, CompileEnv& env);

/// Tile ops, in TileOps.cpp.
std::unique_ptr<CStmt> compile_copy(const ir::Copy* op, CompileEnv& env);
std::unique_ptr<CStmt> compile_gemm(const ir::Gemm* op, CompileEnv& env);
std::unique_ptr<CStmt> compile_fill(const ir::Fill* op, CompileEnv& env);
std::unique_ptr<CStmt> compile_reduce(const ir::Reduce* op, CompileEnv& env);

/// A region with its offsets compiled.
struct CRegion {
  int slot;
  std::vector<std::unique_ptr<CExpr>> min;
  std::vector<int64_t> extent;
  CRegion(const ir::Region& r, CompileEnv& env, const SourceLoc& loc);
  /// Evaluates the offsets (they must be uniform).
  std::vector<int64_t> origin(Ctx& c, const SourceLoc& loc) const;
};

} // namespace tp::cpu
