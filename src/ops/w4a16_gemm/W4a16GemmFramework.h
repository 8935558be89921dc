// w4a16 GEMM's framework operator: what a PyTorch user without a fused int4 kernel runs today,
// a dequantize kernel (W and scales -> dense weights [K, N] in the dtype, a temporary) and then
// torch.matmul, which is cuBLASLt. Where cuBLASLt is missing the fp32 GPU reference GEMM
// stands in and says so in its note. The dequantize kernel also feeds the fp32 GPU reference.
#pragma once
#include <cuda.h>
#include <memory>
#include <string>
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops::w4a16 {

inline constexpr const char* kFrameworkName = "dequantize kernel + cuBLASLt";

/// The two-step chain for `p` on the current GPU; user error without a GPU.
std::unique_ptr<Framework> make_framework(const Problem& p, const FrameworkOptions& o);
/// Writes dequant(W) [K, N] in p's dtype to `dense` (K * N elements), enqueued on `stream`.
void dequantize(const Problem& p, CUdeviceptr words, CUdeviceptr scales, CUdeviceptr dense,
                CUstream stream);
/// Compiles the dequantize kernel for every dtype through NVRTC, no GPU needed (for CI);
/// returns their names ("dequant_int4 bf16", ...). UserError with NVRTC's log when one fails.
std::vector<std::string> compile_framework(const std::string& arch);

} // namespace tp::ops::w4a16
