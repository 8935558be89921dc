// The Llama element-wise kernels (tile language) on the CPU interpreter against plain C++, and
// through the CUDA backend + NVRTC for sm_90a without a GPU (they lower and compile).
#include <cmath>
#include <gtest/gtest.h>

#include "compile/Lower.h"
#include "runtime/DeviceConvert.h"

#include "codegen/cpu/Interpreter.h"
#include "codegen/cuda/LoweredKernel.h"
#include "dispatch/DeviceRun.h"
#include "llama/DeviceExec.h"
#include "llama/LlamaKernels.h"
#include "runtime/Jit.h"
#include "runtime/Nvrtc.h"

using namespace tp;
using namespace tp::models;

namespace {

LlamaConfig small() {
  LlamaConfig c = LlamaConfig::tiny();
  c.batch = 2;
  c.seq = 5; // not a multiple of anything the kernels tile by
  return c;
}

HostTensor random(DType t, std::vector<int64_t> shape, uint64_t seed) {
  HostTensor h(t, std::move(shape));
  h.fill_random(seed);
  return h;
}

HostTensor poisoned(DType t, std::vector<int64_t> shape) {
  HostTensor h(t, std::move(shape));
  h.poison();
  return h;
}

/// |got - want| within one rounding of the activation dtype (plus f32 slack) everywhere.
void expect_close(const HostTensor& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  int bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double tol = 1e-5 + 8e-3 * std::fabs(want[i]); // bf16 keeps 8 bits: half an ulp is 2^-9
    if (!(std::fabs(got.get(i) - want[i]) <= tol) && bad++ < 3)
      ADD_FAILURE() << what << " at " << i << ": got " << got.get(i) << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0) << what;
}

} // namespace

TEST(LlamaKernels, RmsNormMatchesPlainCpp) {
  LlamaConfig c = small();
  LlamaKernels k(c);
  const int64_t T = c.tokens(), Hd = c.hidden;
  HostTensor X = random(c.dtype, {T, Hd}, 1), W = random(c.dtype, {Hd}, 2);
  HostTensor Y = poisoned(c.dtype, {T, Hd});
  cpu::interpret(k.rmsnorm, {&X, &W, &Y});
  std::vector<double> want(T * Hd);
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t d = 0; d < Hd; ++d)
      ss += X.get(t * Hd + d) * X.get(t * Hd + d);
    double r = 1.0 / std::sqrt(ss / Hd + c.rms_eps);
    for (int64_t d = 0; d < Hd; ++d)
      want[t * Hd + d] = X.get(t * Hd + d) * r * W.get(d);
  }
  expect_close(Y, want, "rmsnorm");
}

TEST(LlamaKernels, EmbeddingGathersRows) {
  LlamaConfig c = small();
  LlamaKernels k(c);
  const int64_t T = c.tokens(), Hd = c.hidden;
  HostTensor ids(DType::i32, {T}), E = random(c.dtype, {c.vocab, Hd}, 3);
  for (int64_t t = 0; t < T; ++t)
    ids.set(t, (t * 37) % c.vocab);
  HostTensor X = poisoned(c.dtype, {T, Hd});
  cpu::interpret(k.embedding, {&ids, &E, &X});
  std::vector<double> want(T * Hd);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < Hd; ++d)
      want[t * Hd + d] = E.get(((t * 37) % c.vocab) * Hd + d);
  expect_close(X, want, "embedding");
}

TEST(LlamaKernels, RopeSplitRotatesQueriesAndKeysAndCopiesValues) {
  LlamaConfig c = small();
  LlamaKernels k(c);
  const int64_t B = c.batch, S = c.seq, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  HostTensor QKV = random(c.dtype, {c.tokens(), c.qkv_dim()}, 4);
  HostTensor COS(DType::f32, {S, D / 2}), SIN(DType::f32, {S, D / 2});
  for (int64_t s = 0; s < S; ++s)
    for (int64_t d = 0; d < D / 2; ++d) {
      double a = s * std::pow(c.rope_theta, -2.0 * d / D);
      COS.set(s * D / 2 + d, std::cos(a));
      SIN.set(s * D / 2 + d, std::sin(a));
    }
  HostTensor Q = poisoned(c.dtype, {B, H, S, D}), K = poisoned(c.dtype, {B, Hkv, S, D});
  HostTensor V = poisoned(c.dtype, {B, Hkv, S, D});
  cpu::interpret(k.rope_split, {&QKV, &COS, &SIN, &Q, &K, &V});
  auto expect_heads = [&](const HostTensor& out, int64_t heads, int64_t col0, bool rotate,
                          const char* what) {
    std::vector<double> want(out.numel());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t s = 0; s < S; ++s)
          for (int64_t d = 0; d < D; ++d) {
            int64_t row = (b * S + s) * c.qkv_dim() + col0 + h * D;
            int64_t j = d % (D / 2);
            double x1 = QKV.get(row + j), x2 = QKV.get(row + j + D / 2);
            double cs = COS.get(s * D / 2 + j), sn = SIN.get(s * D / 2 + j);
            double v = !rotate     ? QKV.get(row + d)
                       : d < D / 2 ? x1 * cs - x2 * sn
                                   : x2 * cs + x1 * sn;
            want[((b * heads + h) * S + s) * D + d] = v;
          }
    expect_close(out, want, what);
  };
  expect_heads(Q, H, 0, true, "Q");
  expect_heads(K, Hkv, H * D, true, "K");
  expect_heads(V, Hkv, (H + Hkv) * D, false, "V");
}

TEST(LlamaKernels, MergeHeadsResidualSwigluAndGatherLast) {
  LlamaConfig c = small();
  LlamaKernels k(c);
  const int64_t B = c.batch, S = c.seq, H = c.heads, D = c.head_dim, T = c.tokens();
  const int64_t Hd = c.hidden, F = c.ffn;

  HostTensor O = random(c.dtype, {B, H, S, D}, 5), A = poisoned(c.dtype, {T, H * D});
  cpu::interpret(k.merge_heads, {&O, &A});
  std::vector<double> want(T * H * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          want[(b * S + s) * H * D + h * D + d] = O.get(((b * H + h) * S + s) * D + d);
  expect_close(A, want, "merge_heads");

  HostTensor X = random(c.dtype, {T, Hd}, 6), Y = random(c.dtype, {T, Hd}, 7);
  want.assign(T * Hd, 0);
  for (int64_t i = 0; i < T * Hd; ++i)
    want[i] = X.get(i) + Y.get(i);
  cpu::interpret(k.residual_add, {&X, &Y});
  expect_close(X, want, "residual_add");

  HostTensor GU = random(c.dtype, {T, 2 * F}, 8), Hh = poisoned(c.dtype, {T, F});
  cpu::interpret(k.swiglu, {&GU, &Hh});
  want.assign(T * F, 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t f = 0; f < F; ++f) {
      double g = GU.get(t * 2 * F + f), u = GU.get(t * 2 * F + F + f);
      want[t * F + f] = g / (1 + std::exp(-g)) * u;
    }
  expect_close(Hh, want, "swiglu");

  HostTensor L = poisoned(c.dtype, {B, Hd});
  cpu::interpret(k.gather_last, {&X, &L});
  want.assign(B * Hd, 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t d = 0; d < Hd; ++d)
      want[b * Hd + d] = X.get((b * S + S - 1) * Hd + d);
  expect_close(L, want, "gather_last");
}

TEST(LlamaKernels, LowerAndCompileForSm90aAtLlama3Sizes) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC: " << why;
  for (const LlamaConfig& c : {LlamaConfig::llama3_8b(), LlamaConfig::tiny()}) {
    LlamaKernels k(c);
    for (const Kernel* kern : {&k.embedding, &k.rmsnorm, &k.rope_split, &k.merge_heads,
                               &k.residual_add, &k.swiglu, &k.gather_last}) {
      SCOPED_TRACE(kern->node().name);
      passes::Target t = passes::Target::parse("sm_90a");
      cuda::LoweredKernel lk = cuda::lower_kernel(*kern, t);
      rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, "sm_90a", {});
      EXPECT_FALSE(j.compiled.cubin.empty());
    }
  }
}

TEST(LlamaKernels, HandWrittenHelperKernelsCompileForSm90a) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC: " << why;
  EXPECT_NO_THROW(rt::compile_convert_kernel("sm_90a"));
}
