// Rotary position embedding as Hugging Face's Llama applies it (rotate-half: element i pairs
// with i + D/2), on q [T, H, D] and k [T, Hkv, D] at positions pos [T] (i32):
//   out[t, h, i]       = x[t, h, i] cos(a) - x[t, h, i + D/2] sin(a)
//   out[t, h, i + D/2] = x[t, h, i + D/2] cos(a) + x[t, h, i] sin(a),   a = pos[t] inv_freq[i]
// inv_freq[i] = base^(-2i/D), with Llama-3's "llama3" rope_scaling applied to it (factor 8,
// low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192) unless
// scaling=none. The angle, cos and sin are computed in f32 (as HF's rotary embedding does),
// the rotation in f32 with one rounding into the dtype.
//
// Parameters: q, k, pos, q_out, k_out. HF rotates q and k "in place" (it rebinds the names to
// new tensors); here the outputs are parameters of their own, as every kernel output is in the
// tile language's argument model. They must not alias q and k: the generated CUDA declares
// every pointer __restrict__. A caller that wants q rotated in place passes a scratch q_out
// and swaps the buffers.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilepilot/lang.h"
#include "tilepilot/problem.h"
#include "tilepilot/tensor.h"

namespace tp::ops::rope {

/// Llama-3's rope_scaling ("llama3").
struct Llama3Scaling {
  double factor = 8, low_freq_factor = 1, high_freq_factor = 4, original_max_position = 8192;
};

/// Keys T, H, Hkv, D (even), base (default 500000), start (the first position, default 0:
/// make_args gives token t position start + t) and scaling (llama3 or none, default llama3);
/// dtype bf16 or f16. User error naming the key.
Problem parse(const std::map<std::string, std::string>& kv, DType dtype);
bool llama3_scaled(const Problem& p);
Config default_config(const Problem& p, const std::string& arch);
/// User error when `c` lacks a knob or a knob is out of range.
void validate(const Problem& p, const Config& c);
inline constexpr int64_t kMaxPerThread = 64;
/// Blocks of `tokens` tokens, all heads; H, Hkv, D are compile-time constants, T is bound at
/// launch.
Kernel build(const Problem& p, const Config& c);
/// q and k uniform in [-1, 1), pos = start + t, outputs poisoned.
std::vector<HostTensor> make_args(const Problem& p, uint64_t seed);
/// fp64 values of output `tensor` (3: q_out, 4: k_out) over tokens [t0, t0 + nt) x heads
/// [h0, h0 + nh) x [d0, d0 + nd), at the positions in args[2].
std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args, int tensor,
                              int64_t t0, int64_t nt, int64_t h0, int64_t nh, int64_t d0,
                              int64_t nd);

/// inv_freq in fp64 (the reference's) and in f32 computed as HF does in torch's float32 ops
/// (the framework operator's, which uploads it like HF's inv_freq buffer).
std::vector<double> inv_freq_f64(int64_t D, double base, bool llama3);
std::vector<float> inv_freq_f32(int64_t D, float base, bool llama3);

/// sin(a) and cos(a) of an f32 expression, from the tile language's arithmetic: the quadrant
/// k = round(a 2/pi), a three-part Cody-Waite reduction r = a - k pi/2 and minimax polynomials
/// on [-pi/4, pi/4]; about 2 ulp for |a| < 2^16 pi/2 (beyond, the reduction loses bits, as the
/// f32 angle already has). The language has no sin or cos of its own.
struct SinCos {
  Expr sin, cos;
};
SinCos sincos_f32(const Expr& a);

} // namespace tp::ops::rope
