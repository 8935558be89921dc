// SwiGLU over a fused gate/up projection: out[T, I] = silu(gate) * up, where gu [T, 2I] holds
// gate in the first I columns of each row and up in the last I (the layout of a fused
// gate_up_proj). f32 math, one rounding into the dtype. The tile-language kernel, parsing,
// seeded inputs and the fp64 reference; SwiGluOp wraps these as an Operator.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilepilot/lang.h"
#include "tilepilot/problem.h"
#include "tilepilot/tensor.h"

namespace tp::ops::swiglu {

/// Keys T, I; dtype bf16, f16 or f32. User error naming the key.
Problem parse(const std::map<std::string, std::string>& kv, DType dtype);
Config default_config(const Problem& p, const std::string& arch);
/// User error when `c` lacks a knob or a knob is out of range (bm x bn over threads at most
/// kMaxPerThread elements each).
void validate(const Problem& p, const Config& c);
inline constexpr int64_t kMaxPerThread = 32;
/// Blocks of bm rows x bn columns of the output; I is a compile-time constant, T is bound at
/// launch. Parameters gu, out.
Kernel build(const Problem& p, const Config& c);
/// gu uniform in [-4, 4) (silu's curved part and both tails), out poisoned.
std::vector<HostTensor> make_args(const Problem& p, uint64_t seed);
/// fp64 out over rows [r0, r0 + nr) x columns [c0, c0 + nc).
std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args, int64_t r0,
                              int64_t nr, int64_t c0, int64_t nc);

} // namespace tp::ops::swiglu
