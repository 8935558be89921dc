// decode_attention's framework operator: what a PyTorch user runs for decode attention without
// a fused kernel (SDPA's math path: scores = q k^T scale in f32, masked softmax, P v), and for
// a paged cache a gather of the pages into a contiguous buffer first, as plain CUDA kernels
// compiled with NVRTC.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops::decode_attention {

inline constexpr const char* kFrameworkName =
    "eager PyTorch (SDPA math path: q k^T, masked softmax, P v; paged: gather pages first)";

/// The unfused chain for `p` on the current GPU; user error without one.
std::unique_ptr<Framework> make_framework(const Problem& p);
/// Compiles the chain's kernels for every dtype through NVRTC, no GPU needed (for CI); returns
/// their names ("da_scores bf16", ...). UserError with NVRTC's log when one fails.
std::vector<std::string> compile_framework(const std::string& arch);

} // namespace tp::ops::decode_attention
