// The built-in operators (Builtins.h).
#include "ops/Builtins.h"

#include "ops/attention/AttentionOp.h"
#include "ops/gemm/GemmOp.h"

namespace tp::ops {

std::vector<std::shared_ptr<const Operator>> builtin_operators() {
  return {std::make_shared<GemmOp>(), std::make_shared<AttentionOp>()};
}

} // namespace tp::ops
