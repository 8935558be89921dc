// The Llama glue kernels (tile language) on the CPU interpreter against plain C++, and through
// the CUDA backend + NVRTC for sm_90a without a GPU (they lower and compile).
#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <set>

#include "compile/Lower.h"
#include "runtime/DeviceConvert.h"

#include "codegen/cpu/Interpreter.h"
#include "codegen/cuda/LoweredKernel.h"
#include "dispatch/DeviceRun.h"
#include "llama/DeviceExec.h"
#include "llama/Llama.h"
#include "llama/LlamaKernels.h"
#include "runtime/Jit.h"
#include "runtime/Nvrtc.h"
#include "tilepilot/operator.h"

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

TEST(LlamaKernels, SplitAndToHeadsMoveQueriesKeysAndValuesIntoTheOperatorsLayouts) {
  LlamaConfig c = small();
  LlamaKernels k(c);
  const int64_t B = c.batch, S = c.seq, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  const int64_t T = c.tokens(), W = c.qkv_dim();
  HostTensor QKV = random(c.dtype, {T, W}, 4);
  HostTensor Qt = poisoned(c.dtype, {T, H, D}), Kt = poisoned(c.dtype, {T, Hkv, D});
  cpu::interpret(k.split_qk, {&QKV, &Qt, &Kt});
  // Token-major [T, heads, D]: q's heads first in each row, then k's.
  auto token_major = [&](int64_t heads, int64_t col0) {
    std::vector<double> want(T * heads * D);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < heads * D; ++i)
        want[t * heads * D + i] = QKV.get(t * W + col0 + i);
    return want;
  };
  expect_close(Qt, token_major(H, 0), "split_qk q");
  expect_close(Kt, token_major(Hkv, H * D), "split_qk k");

  // to_heads takes the rotated q and k (any values: it only moves them) and v from QKV.
  HostTensor QR = random(c.dtype, {T, H, D}, 5), KR = random(c.dtype, {T, Hkv, D}, 6);
  HostTensor Q = poisoned(c.dtype, {B, H, S, D}), K = poisoned(c.dtype, {B, Hkv, S, D});
  HostTensor V = poisoned(c.dtype, {B, Hkv, S, D});
  cpu::interpret(k.to_heads, {&QR, &KR, &QKV, &Q, &K, &V});
  auto head_major = [&](int64_t heads, const std::function<double(int64_t, int64_t, int64_t)>& at) {
    std::vector<double> want(B * heads * S * D);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t s = 0; s < S; ++s)
          for (int64_t d = 0; d < D; ++d)
            want[((b * heads + h) * S + s) * D + d] = at(b * S + s, h, d);
    return want;
  };
  expect_close(
      Q,
      head_major(H, [&](int64_t t, int64_t h, int64_t d) { return QR.get((t * H + h) * D + d); }),
      "to_heads Q");
  expect_close(K,
               head_major(Hkv, [&](int64_t t, int64_t h,
                                   int64_t d) { return KR.get((t * Hkv + h) * D + d); }),
               "to_heads K");
  expect_close(V,
               head_major(Hkv, [&](int64_t t, int64_t h,
                                   int64_t d) { return QKV.get(t * W + (H + Hkv + h) * D + d); }),
               "to_heads V");
}

TEST(LlamaKernels, CacheAppendWritesOnlyEachSequencesNewEntry) {
  LlamaConfig c = LlamaConfig::tiny_decode();
  LlamaKernels k(c);
  const int64_t B = c.batch, H = c.heads, Hkv = c.kv_heads, D = c.head_dim, W = c.qkv_dim();
  const int64_t L = c.cache_capacity();
  HostTensor KR = random(c.dtype, {B, Hkv, D}, 7), QKV = random(c.dtype, {B, W}, 8);
  HostTensor POS(DType::i32, {B});
  for (int64_t b = 0; b < B; ++b)
    POS.set(b, static_cast<double>(c.kv_len_of(b)));
  HostTensor KC = random(c.dtype, {B, Hkv, L, D}, 9), VC = random(c.dtype, {B, Hkv, L, D}, 10);
  const HostTensor KC0 = KC, VC0 = VC;
  cpu::interpret(k.cache_append, {&KR, &QKV, &POS, &KC, &VC});
  std::vector<double> wk(KC.numel()), wv(VC.numel());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t i = ((b * Hkv + h) * L + l) * D + d;
          const bool fresh = l == c.kv_len_of(b);
          wk[i] = fresh ? KR.get((b * Hkv + h) * D + d) : KC0.get(i);
          wv[i] = fresh ? QKV.get(b * W + (H + Hkv + h) * D + d) : VC0.get(i);
        }
  expect_close(KC, wk, "k cache");
  expect_close(VC, wv, "v cache");
}

TEST(LlamaKernels, MergeHeadsAndGatherLast) {
  LlamaConfig c = small();
  LlamaKernels k(c);
  const int64_t B = c.batch, S = c.seq, H = c.heads, D = c.head_dim, T = c.tokens();
  const int64_t Hd = c.hidden;

  HostTensor O = random(c.dtype, {B, H, S, D}, 5), A = poisoned(c.dtype, {T, H * D});
  cpu::interpret(k.merge_heads, {&O, &A});
  std::vector<double> want(T * H * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          want[(b * S + s) * H * D + h * D + d] = O.get(((b * H + h) * S + s) * D + d);
  expect_close(A, want, "merge_heads");

  HostTensor X = random(c.dtype, {T, Hd}, 6), L = poisoned(c.dtype, {B, Hd});
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
  LlamaConfig decode = LlamaConfig::llama3_8b();
  decode.mode = LlamaMode::decode;
  for (const LlamaConfig& c : {LlamaConfig::llama3_8b(), LlamaConfig::tiny(), decode}) {
    LlamaKernels k(c);
    for (const Kernel* kern : {&k.embedding, &k.split_qk, &k.to_heads, &k.merge_heads,
                               &k.gather_last, &k.cache_append}) {
      SCOPED_TRACE(kern->node().name);
      passes::Target t = passes::Target::parse("sm_90a");
      cuda::LoweredKernel lk = cuda::lower_kernel(*kern, t);
      rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, "sm_90a", {});
      EXPECT_FALSE(j.compiled.cubin.empty());
    }
  }
}

TEST(LlamaKernels, EveryOperatorKernelOfBothPathsCompilesForSm90aAtLlama3Sizes) {
  // What --pin-defaults runs on an H200: each problem's default sm_90a config must lower and
  // compile, or the GPU run would fall back with compile_failed.
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC: " << why;
  std::set<std::string> compiled;
  for (const LlamaConfig& c :
       {parse_llama_config({{"tokens", "2048"}}),
        parse_llama_config({{"mode", "decode"}, {"batch", "8"}, {"kv_len", "4096"}})})
    for (const auto& [label, p] : llama_problems(c)) {
      SCOPED_TRACE(label + " " + p.shape_str());
      const ops::Operator& op = ops::find_operator(p.op);
      ops::Config cfg = op.default_config(p, "sm_90a");
      ASSERT_NO_THROW(op.validate(p, cfg));
      // Every kernel of the call's program (decode's gemm splits K: split, then combine).
      for (const ops::KernelStep& s : ops::checked_program(op, p, cfg).steps) {
        cuda::LoweredKernel lk = cuda::lower_kernel(s.kernel, passes::Target::parse("sm_90a"));
        if (!compiled.insert(lk.canonical_ir).second) continue; // the same kernel as before
        rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, "sm_90a", {});
        EXPECT_FALSE(j.compiled.cubin.empty());
      }
    }
  EXPECT_GE(compiled.size(), 7u) << "gemm, attention, decode_attention, rmsnorm x2, rope, swiglu";
}

TEST(LlamaKernels, HandWrittenHelperKernelsCompileForSm90a) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC: " << why;
  EXPECT_NO_THROW(rt::compile_convert_kernel("sm_90a"));
}
