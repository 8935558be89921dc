// The built-in operators (Builtins.h).
#include "ops/Builtins.h"

#include "ops/attention/AttentionOp.h"
#include "ops/decode_attention/DecodeAttentionOp.h"
#include "ops/gemm/GemmOp.h"
#include "ops/grouped_gemm/GroupedGemmOp.h"
#include "ops/rmsnorm/RmsNormOp.h"
#include "ops/rope/RopeOp.h"
#include "ops/swiglu/SwiGluOp.h"
#include "ops/w4a16_gemm/W4a16GemmOp.h"

namespace tp::ops {

std::vector<std::shared_ptr<const Operator>> builtin_operators() {
  return {std::make_shared<GemmOp>(),      std::make_shared<AttentionOp>(),
          std::make_shared<RmsNormOp>(),   std::make_shared<SwiGluOp>(),
          std::make_shared<RopeOp>(),      std::make_shared<DecodeAttentionOp>(),
          std::make_shared<W4a16GemmOp>(), std::make_shared<GroupedGemmOp>()};
}

} // namespace tp::ops
