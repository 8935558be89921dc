// RoPE's kernel, parsing, inputs, inv_freq and fp64 reference (see Rope.h). A block takes
// `tokens` tokens: it computes cos and sin once per (token, frequency) into fragments, then
// rotates every head of q and of k with them, each half of the head dim in a fragment of its
// own so that every element pairs with the same index of the other half.
#include "ops/rope/Rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/ParseHelpers.h"
#include "tilepilot/error.h"

namespace tp::ops::rope {

namespace {

constexpr int64_t kDefaultBase = 500000; // Llama-3

/// Element i of `table` for an i32 expression i in [0, table.size()): a balanced tree of
/// selects over the constants, so a host-computed f32 table enters the kernel bit for bit.
Expr lookup(const std::vector<float>& table, const Expr& i, size_t lo, size_t hi) {
  if (hi - lo == 1) return Expr(static_cast<double>(table[lo]));
  size_t mid = (lo + hi) / 2;
  return select(i < static_cast<int64_t>(mid), lookup(table, i, lo, mid),
                lookup(table, i, mid, hi));
}

} // namespace

Problem parse(const std::map<std::string, std::string>& kv, DType dtype) {
  reject_unknown(kv, {"T", "H", "Hkv", "D", "base", "start", "scaling"}, "rope");
  const std::string ex = "T=4096,H=32,Hkv=8,D=128";
  Problem p;
  p.op = "rope";
  p.dtype = dtype;
  for (const char* k : {"T", "H", "Hkv", "D"})
    p.shape[k] = require_positive(kv, k, "rope", ex);
  p.shape["base"] = optional_int(kv, "base", kDefaultBase, "rope");
  p.shape["start"] = optional_int(kv, "start", 0, "rope", true);
  if (p.shape["D"] % 2)
    user_error() << "rope: D=" << p.shape["D"]
                 << " is odd; rotate-half pairs element i with i + D/2, so D must be even";
  if (p.shape["D"] > 512) user_error() << "rope: D=" << p.shape["D"] << " must be at most 512";
  if (p.shape["start"] + p.shape["T"] > 2147483647)
    user_error() << "rope: start + T = " << p.shape["start"] + p.shape["T"]
                 << " positions do not fit in the i32 pos tensor";
  std::string scaling = kv.count("scaling") ? kv.at("scaling") : "llama3";
  if (scaling != "llama3" && scaling != "none")
    user_error() << "rope: scaling=" << scaling
                 << " is not supported; use llama3 (Llama-3.1's rope_scaling) or none";
  p.options["scaling"] = scaling;
  if (dtype != DType::bf16 && dtype != DType::f16)
    user_error() << "rope: dtype " << dtype_name(dtype) << " is not supported; use bf16 or f16";
  return p;
}

bool llama3_scaled(const Problem& p) {
  auto it = p.options.find("scaling");
  return it == p.options.end() || it->second == "llama3";
}

Config default_config(const Problem& p, const std::string& arch) {
  (void)arch; // the interpreter runs any valid config; the GPU rule serves it too
  // One token per block: all of its heads over about 16 elements of each half per thread
  // (H = 32, D = 128: 128 threads). A prior, not yet measured.
  int64_t threads = std::clamp<int64_t>((p.at("H") * p.at("D") / 32 + 31) / 32 * 32, 32, 1024);
  return {{"tokens", 1}, {"threads", threads}};
}

void validate(const Problem& p, const Config& c) {
  // Each knob's domain is its Knob's (check_config); this is the rule between them.
  const int64_t tokens = c.at("tokens"), threads = c.at("threads");
  // Each half of q's heads is a fragment: tokens x H x D/2 elements.
  const int64_t per_thread = (tokens * p.at("H") * p.at("D") / 2 + threads - 1) / threads;
  if (per_thread > kMaxPerThread)
    user_error() << "rope: tokens=" << tokens << " x H=" << p.at("H") << " x D/2=" << p.at("D") / 2
                 << " over threads=" << threads << " is " << per_thread
                 << " elements per thread in each half, more than " << kMaxPerThread
                 << "; use fewer tokens or more threads";
}

SinCos sincos_f32(const Expr& a) {
  // pi/2 = P1 + P2 + P3 + P4 (error 5e-15), P1..P3 of 7 significant bits: k * Pi is exact in
  // f32 for k < 2^17, so the reduction loses nothing up to |a| = 2^17 pi/2 (205887).
  constexpr double P1 = 1.5625, P2 = 0.0081787109375, P3 = 0.00011730194091796875;
  constexpr double P4 = 3.1391647326017846e-07;
  Var k = let("rope_k", cast(i32, a * (2 / std::numbers::pi) + select(a >= 0, 0.5, -0.5)));
  Var kf = let("rope_kf", cast(f32, k));
  Var r = let("rope_r", (((a - kf * P1) - kf * P2) - kf * P3) - kf * P4);
  Var z = let("rope_z", r * r);
  // Minimax polynomials on [-pi/4, pi/4] (Cephes' sinf and cosf).
  Var s =
      let("rope_s", r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4)));
  Var c = let(
      "rope_c",
      1.0 - 0.5 * z +
          z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5)));
  Var q = let("rope_q", k & 3); // the quadrant; & 3 is also right for negative k
  return {select(q == 0, s, select(q == 1, c, select(q == 2, -s, -c))),
          select(q == 0, c, select(q == 1, -s, select(q == 2, -c, s)))};
}

std::vector<double> inv_freq_f64(int64_t D, double base, bool llama3) {
  const Llama3Scaling l;
  const double low_wl = l.original_max_position / l.low_freq_factor;
  const double high_wl = l.original_max_position / l.high_freq_factor;
  std::vector<double> out;
  for (int64_t i = 0; i < D / 2; ++i) {
    double inv = 1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(D));
    if (llama3) {
      double wl = 2 * std::numbers::pi / inv;
      double scaled = wl > low_wl ? inv / l.factor : inv;
      double smooth = (l.original_max_position / wl - l.low_freq_factor) /
                      (l.high_freq_factor - l.low_freq_factor);
      double smoothed = (1 - smooth) * scaled / l.factor + smooth * scaled;
      inv = !(wl < high_wl) && !(wl > low_wl) ? smoothed : scaled;
    }
    out.push_back(inv);
  }
  return out;
}

std::vector<float> inv_freq_f32(int64_t D, float base, bool llama3) {
  // HF: inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), then
  // _compute_llama3_parameters, every step a float32 tensor op (Python scalars become f32).
  // Torch evaluates `scalar / tensor` as reciprocal(tensor) * scalar where this divides, so an
  // entry may differ from HF's by an ulp; the kernel and the references share this table.
  const Llama3Scaling l;
  const float factor = static_cast<float>(l.factor), lff = static_cast<float>(l.low_freq_factor);
  const float hff = static_cast<float>(l.high_freq_factor);
  const float old_len = static_cast<float>(l.original_max_position);
  const float low_wl = old_len / lff, high_wl = old_len / hff;
  const float two_pi = static_cast<float>(2 * std::numbers::pi);
  std::vector<float> out;
  for (int64_t i = 0; i < D / 2; ++i) {
    float e = static_cast<float>(2 * i) / static_cast<float>(D);
    float inv = 1.0f / std::pow(base, e);
    if (llama3) {
      float wl = two_pi / inv;
      float scaled = wl > low_wl ? inv / factor : inv;
      float smooth = (old_len / wl - lff) / (hff - lff);
      float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
      inv = !(wl < high_wl) && !(wl > low_wl) ? smoothed : scaled;
    }
    out.push_back(inv);
  }
  return out;
}

Kernel build(const Problem& p, const Config& c) {
  validate(p, c);
  const int64_t H = p.at("H"), Hkv = p.at("Hkv"), D = p.at("D"), half = D / 2;
  const int64_t bt = c.at("tokens");
  const DType dt = p.dtype;
  const std::vector<float> inv_freq =
      inv_freq_f32(D, static_cast<float>(p.at("base")), llama3_scaled(p));
  Dim T("T");
  Tensor Q("q", {T, H, D}, dt), K("k", {T, Hkv, D}, dt), P("pos", {T}, i32);
  Tensor QO("q_out", {T, H, D}, dt), KO("k_out", {T, Hkv, D}, dt);
  std::string name = "rope_h" + std::to_string(H) + "_hkv" + std::to_string(Hkv) + "_d" +
                     std::to_string(D) + "_base" + std::to_string(p.at("base")) +
                     (llama3_scaled(p) ? "_llama3" : "");
  return kernel(name, {Q, K, P, QO, KO}, grid(ceildiv(T, bt)),
                threads(static_cast<int>(c.at("threads"))), [&](Var b) {
                  Expr t0 = b * bt;
                  Tile pos = alloc_fragment({bt}, f32); // position_ids.float(), as HF; past T: 0
                  Tile inv = alloc_fragment({half}, f32);
                  Tile cs = alloc_fragment({bt, half}, f32), sn = alloc_fragment({bt, half}, f32);
                  copy(P.tile(t0), pos);
                  parallel({half},
                           [&](Var i) { inv(i) = lookup(inv_freq, i, 0, inv_freq.size()); });
                  parallel({bt, half}, [&](Var t, Var i) {
                    Var angle = let("rope_angle", pos(t) * inv(i));
                    SinCos sc = sincos_f32(angle);
                    cs(t, i) = sc.cos;
                    sn(t, i) = sc.sin;
                  });
                  auto rotate = [&](const Tensor& X, const Tensor& XO, int64_t heads) {
                    Tile lo = alloc_fragment({bt, heads, half}, f32);
                    Tile hi = alloc_fragment({bt, heads, half}, f32);
                    copy(X.tile(t0, 0, 0), lo);
                    copy(X.tile(t0, 0, half), hi);
                    parallel({bt, heads, half}, [&](Var t, Var h, Var i) {
                      Var x1 = let("rope_x1", lo(t, h, i)), x2 = let("rope_x2", hi(t, h, i));
                      lo(t, h, i) = x1 * cs(t, i) - x2 * sn(t, i);
                      hi(t, h, i) = x2 * cs(t, i) + x1 * sn(t, i);
                    });
                    copy(lo, XO.tile(t0, 0, 0));
                    copy(hi, XO.tile(t0, 0, half));
                  };
                  rotate(Q, QO, H);
                  rotate(K, KO, Hkv);
                });
}

std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) {
  const int64_t T = p.at("T"), H = p.at("H"), Hkv = p.at("Hkv"), D = p.at("D");
  std::vector<HostTensor> a;
  a.emplace_back(p.dtype, std::vector<int64_t>{T, H, D});
  a.back().fill_random(seed * 3 + 1);
  a.emplace_back(p.dtype, std::vector<int64_t>{T, Hkv, D});
  a.back().fill_random(seed * 3 + 2);
  a.emplace_back(DType::i32, std::vector<int64_t>{T});
  for (int64_t t = 0; t < T; ++t)
    a.back().set(t, static_cast<double>(p.at("start") + t));
  a.emplace_back(p.dtype, std::vector<int64_t>{T, H, D});
  a.back().poison();
  a.emplace_back(p.dtype, std::vector<int64_t>{T, Hkv, D});
  a.back().poison();
  return a;
}

std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& a, int tensor,
                              int64_t t0, int64_t nt, int64_t h0, int64_t nh, int64_t d0,
                              int64_t nd) {
  internal_assert(tensor == 3 || tensor == 4)
      << "rope reference asked for parameter " << tensor << ", which is not an output";
  const int64_t heads = tensor == 3 ? p.at("H") : p.at("Hkv"), D = p.at("D"), half = D / 2;
  const HostTensor& x = a[tensor == 3 ? 0 : 1];
  // The angle is the f32 product HF computes (f32 position times f32 inv_freq): at position
  // 10^5 its rounding alone moves the angle by 4e-3, which no bf16 tolerance should have to
  // absorb. cos, sin and the rotation are exact from there.
  const std::vector<float> inv =
      inv_freq_f32(D, static_cast<float>(p.at("base")), llama3_scaled(p));
  std::vector<double> out, cs(half), sn(half);
  out.reserve(nt * nh * nd);
  for (int64_t t = t0; t < t0 + nt; ++t) {
    const float pos = static_cast<float>(a[2].get(t));
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos * inv[i]);
      cs[i] = std::cos(angle);
      sn[i] = std::sin(angle);
    }
    for (int64_t h = h0; h < h0 + nh; ++h) {
      const int64_t row = (t * heads + h) * D;
      for (int64_t d = d0; d < d0 + nd; ++d) {
        const int64_t i = d % half;
        out.push_back(d < half ? x.get(row + d) * cs[i] - x.get(row + d + half) * sn[i]
                               : x.get(row + d) * cs[i] + x.get(row + d - half) * sn[i]);
      }
    }
  }
  return out;
}

} // namespace tp::ops::rope
