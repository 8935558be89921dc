// SwiGLU's kernel, parsing, inputs and fp64 reference (see SwiGlu.h). Each block reads the gate
// and up tiles of its bm x bn output tile from the two halves of gu and writes the product.
#include "ops/swiglu/SwiGlu.h"

#include <algorithm>
#include <cmath>

#include "ops/ParseHelpers.h"
#include "tilepilot/error.h"

namespace tp::ops::swiglu {

Problem parse(const std::map<std::string, std::string>& kv, DType dtype) {
  reject_unknown(kv, {"T", "I"}, "swiglu");
  const std::string ex = "T=4096,I=14336";
  Problem p;
  p.op = "swiglu";
  p.dtype = dtype;
  p.shape["T"] = require_positive(kv, "T", "swiglu", ex);
  p.shape["I"] = require_positive(kv, "I", "swiglu", ex);
  if (2 * p.shape["I"] > 2147483647)
    user_error() << "swiglu: I=" << p.shape["I"]
                 << " makes gu's row 2I longer than a kernel indexes (2^31 - 1); use a smaller I";
  if (dtype != DType::bf16 && dtype != DType::f16 && dtype != DType::f32)
    user_error() << "swiglu: dtype " << dtype_name(dtype)
                 << " is not supported; use bf16, f16 or f32";
  return p;
}

Config default_config(const Problem& p, const std::string& arch) {
  if (arch == "cpu") return {{"bm", 8}, {"bn", 256}, {"threads", 128}};
  // Priors, not yet measured: eight elements per thread; a decode step (few rows) takes
  // narrow one-row tiles so that I = 14336 still spreads over 56 blocks.
  if (p.at("T") < 8) return {{"bm", 1}, {"bn", 256}, {"threads", 32}};
  return {{"bm", 4}, {"bn", 512}, {"threads", 256}};
}

void validate(const Problem&, const Config& c) {
  // Each knob's domain is its Knob's (check_config); this is the rule between them.
  const int64_t bm = c.at("bm"), bn = c.at("bn"), threads = c.at("threads");
  const int64_t per_thread = (bm * bn + threads - 1) / threads;
  if (per_thread > kMaxPerThread)
    user_error() << "swiglu: bm=" << bm << " x bn=" << bn << " over threads=" << threads << " is "
                 << per_thread << " elements per thread, more than " << kMaxPerThread
                 << "; use a smaller tile or more threads";
}

Kernel build(const Problem& p, const Config& c) {
  validate(p, c);
  const int64_t I = p.at("I"), bm = c.at("bm"), bn = c.at("bn");
  const DType dt = p.dtype;
  Dim T("T");
  Tensor GU("gu", {T, 2 * I}, dt), O("out", {T, I}, dt);
  return kernel(
      "swiglu_i" + std::to_string(I), {GU, O}, grid(ceildiv(I, bn), ceildiv(T, bm)),
      threads(static_cast<int>(c.at("threads"))), [&](Var bx, Var by) {
        Tile g = alloc_fragment({bm, bn}, f32), u = alloc_fragment({bm, bn}, f32);
        // When bn does not divide I, the last gate tile reads into up's first
        // columns: those lanes are past I in the output and their stores are dropped.
        copy(GU.tile(by * bm, bx * bn), g);
        copy(GU.tile(by * bm, bx * bn + I), u);
        parallel({bm, bn}, [&](Var i, Var j) { g(i, j) = g(i, j) * sigmoid(g(i, j)) * u(i, j); });
        copy(g, O.tile(by * bm, bx * bn));
      });
}

std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) {
  std::vector<HostTensor> a;
  a.emplace_back(p.dtype, std::vector<int64_t>{p.at("T"), 2 * p.at("I")});
  a.back().fill_random(seed * 3 + 1, -4.0, 4.0);
  a.emplace_back(p.dtype, std::vector<int64_t>{p.at("T"), p.at("I")});
  a.back().poison();
  return a;
}

std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& a, int64_t r0,
                              int64_t nr, int64_t c0, int64_t nc) {
  const int64_t I = p.at("I");
  std::vector<double> out(nr * nc);
  for (int64_t i = 0; i < nr; ++i)
    for (int64_t j = 0; j < nc; ++j) {
      const int64_t at = (r0 + i) * 2 * I + c0 + j;
      const double g = a[0].get(at), u = a[0].get(at + I);
      out[i * nc + j] = g / (1.0 + std::exp(-g)) * u;
    }
  return out;
}

} // namespace tp::ops::swiglu
