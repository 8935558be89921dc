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
  std::vector<int64_t> strides = {}; // elements, outermost first; empty = contiguous
};

using Binding = std::map<uint64_t, int64_t>; // Variable uid -> value

/// Checks the tensors (in params order) and binds the Dims and, for strided parameters, their
/// stride variables. A strided parameter given no strides is bound as contiguous; a contiguous
/// parameter given strides must have the contiguous ones (user error otherwise).
Binding bind_args(const KernelNode& k, const std::vector<ArgDesc>& args);
/// Binds the i32 scalars (values in k.scalars order) so that host-side expressions such as
/// grid extents may use them.
void bind_scalars(const KernelNode& k, const std::vector<double>& values, Binding& env);
/// The strides of `a` in elements (the contiguous ones when it gives none).
std::vector<int64_t> element_strides(const ArgDesc& a);
/// Evaluates an integer expression of Dims; internal error on anything else.
int64_t eval_int(const Expr& e, const Binding& env);

} // namespace tp::ir
