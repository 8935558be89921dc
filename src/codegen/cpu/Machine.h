// The CPU interpreter's machine state. Values are doubles rounded to their IR type after every
// operation (f32 arithmetic is computed in double and rounded to float, which is exact for
// + - * /). Inside `parallel`, every expression is evaluated for all iterations ("lanes") at
// once: a value is either uniform (one number for all lanes) or one number per lane.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace tp::cpu {

/// A buffer's contents: row-major doubles, each already rounded to `dtype`.
struct Storage {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape, strides;
  std::vector<double> data;
  void init(const std::string& n, DType t, std::vector<int64_t> s);
  bool in_bounds(const int64_t* idx) const;
};

struct Val {
  const double* p;
  bool uniform;
  double at(int i) const { return p[uniform ? 0 : i]; }
};

struct Ctx {
  int n = 1;                             // lanes of the innermost parallel (1 outside)
  std::vector<double> scalar;            // variable slot -> value (uniform variables)
  std::vector<const double*> lane;       // variable slot -> per-lane values, or nullptr
  std::vector<std::vector<double>> scratch; // expression id -> result buffer
  std::vector<Storage*> buf;             // buffer slot -> storage
  std::vector<std::unique_ptr<Storage>> owned; // buffer slot -> this block's tile
  std::vector<uint8_t> mask;             // active lanes when `masked`
  bool masked = false;
  bool active(int i) const { return !masked || mask[i]; }
};

/// A compiled expression.
class CExpr {
public:
  virtual ~CExpr() = default;
  virtual Val eval(Ctx& c) = 0;
  int id = 0;
  DType type = DType::f32;

protected:
  double* out(Ctx& c, bool uniform) {
    std::vector<double>& s = c.scratch[id];
    size_t need = uniform ? 1 : static_cast<size_t>(c.n);
    if (s.size() < need) s.resize(need);
    return s.data();
  }
};

/// Slots for variables and buffers, and expression ids; shared by all compiled nodes.
struct Layout {
  std::map<uint64_t, int> var_slot, buf_slot;
  std::vector<ir::Buffer> buffers;
  int num_exprs = 0;
  int var(uint64_t uid);
  int buffer(const ir::Buffer& b);
};

std::unique_ptr<CExpr> compile_expr(const Expr& e, Layout& lay, const SourceLoc& loc);

/// Evaluates a compiled expression that must be the same in every lane.
double eval_uniform(CExpr& e, Ctx& c, const char* what, const SourceLoc& loc);

} // namespace tp::cpu
