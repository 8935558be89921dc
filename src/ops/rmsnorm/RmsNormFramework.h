// RMSNorm's framework operator: what PyTorch eager runs for Hugging Face's LlamaRMSNorm (and the
// separate residual add before it), as plain CUDA kernels compiled with NVRTC.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops::rmsnorm {

inline constexpr const char* kFrameworkName = "eager PyTorch (residual add, LlamaRMSNorm)";

/// The unfused chain for `p` on the current GPU; user error without one.
std::unique_ptr<Framework> make_framework(const Problem& p);
/// Compiles the chain's kernels for every dtype through NVRTC, no GPU needed (for CI); returns
/// their names ("eager_sqmean bf16", ...). UserError with NVRTC's log when one fails.
std::vector<std::string> compile_framework(const std::string& arch);

} // namespace tp::ops::rmsnorm
