// RMSNorm as Llama computes it, with an optional fused residual add: the tile-language kernel,
// problem parsing, seeded inputs and the fp64 reference. RmsNormOp wraps these as an Operator.
//
//   residual=0: inputs x [T, H], w [H];        output y [T, H]
//   residual=1: inputs x [T, H], r [T, H], w [H]; outputs s = x + r [T, H] and y [T, H]
//   y = s * rsqrt(mean(s^2) + eps) * w, eps = 1e-5, in f32; s (residual=1; else s = x) is
//   rounded to the dtype before it is normalised, as torch's separate add does.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilepilot/lang.h"
#include "tilepilot/problem.h"
#include "tilepilot/tensor.h"

namespace tp::ops::rmsnorm {

inline constexpr double kEps = 1e-5;

/// Keys T, H, residual (0 or 1, default 0); dtype bf16, f16 or f32. User error naming the key.
Problem parse(const std::map<std::string, std::string>& kv, DType dtype);
/// Parameter indices: x, [r], w, [s], y.
std::vector<int> outputs(const Problem& p);
/// The default knobs for `arch` ("cpu", "sm_80", "sm_90a").
Config default_config(const Problem& p, const std::string& arch);
/// User error when `c` lacks a knob or cannot run `p` (threads not a multiple of 32, more
/// than kMaxPerThread fragment elements per thread).
void validate(const Problem& p, const Config& c);
inline constexpr int64_t kMaxPerThread = 64;
/// Rows from which the default config gives each thread about 32 elements instead of 8: two
/// blocks for each SM of the largest GPU this targets (132 on an H100 / H200 SXM), rounded.
inline constexpr int64_t kManyRows = 256;
/// Knobs rows (rows per block) and threads; H is a compile-time constant, T is bound at launch.
Kernel build(const Problem& p, const Config& c);
/// x and r uniform in [-1, 1), w in [0.5, 1.5), outputs poisoned.
std::vector<HostTensor> make_args(const Problem& p, uint64_t seed);
/// fp64 values of output `tensor` over rows [r0, r0 + nr) x columns [c0, c0 + nc).
std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args, int tensor,
                              int64_t r0, int64_t nr, int64_t c0, int64_t nc);

} // namespace tp::ops::rmsnorm
