// SwiGLU's framework operator: what PyTorch eager runs for Llama's MLP activation,
// F.silu(gate) * up over the halves of a fused gate/up projection, as plain CUDA kernels
// compiled with NVRTC.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops::swiglu {

inline constexpr const char* kFrameworkName = "eager PyTorch (F.silu(gate) * up)";

/// The two-kernel chain for `p` on the current GPU; user error without one.
std::unique_ptr<Framework> make_framework(const Problem& p);
/// Compiles the chain's kernels for every dtype through NVRTC, no GPU needed (for CI); returns
/// their names ("eager_silu bf16", ...). UserError with NVRTC's log when one fails.
std::vector<std::string> compile_framework(const std::string& arch);

} // namespace tp::ops::swiglu
