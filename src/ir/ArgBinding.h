// Binding launch arguments to a kernel's parameters: checks each tensor's dtype, rank and
// constant extents, binds every Dim from the shapes, and evaluates host-side integer
// expressions (grid extents) under that binding. Shared by the interpreter and the CUDA launch.
#pragma once
#include <map>
#include <vector>

#include "ir/IR.h"

namespace tp::ir {

struct ArgDesc {
  DType dtype;
  std::vector<int64_t> shape;
};

using Binding = std::map<uint64_t, int64_t>; // Variable uid -> value

Binding bind_args(const KernelNode& k, const std::vector<ArgDesc>& args);
/// Evaluates an integer expression of Dims; internal error on anything else.
int64_t eval_int(const Expr& e, const Binding& env);

} // namespace tp::ir
