// GEMM epilogues through NVRTC for sm_90a, no GPU needed: lesson 08's GPU config (128 x 256 x
// 64 tiles, 4 stages, 256 consumer threads) with bias + GELU, and with a residual and a scale
// too, against the same GEMM without an epilogue; and the variant for even output rows.
// Measured at this commit (ptxas of NVRTC 13.0): the plain GEMM, bias + GELU, and bias + GELU
// + scale + residual all use 168 registers (the __launch_bounds__(384, 1) cap: 65536 / 384
// rounded down to 8) and spill nothing. Before SinkFragmentLoads the residual fragment, loaded
// whole before the loop, held 128 f32 registers beside the accumulator's 128 and spilled 272
// bytes (136 stored, 136 loaded); before div.full, bias + GELU had 128 div.rn.f32.
#include <gtest/gtest.h>

#include "GemmEpilogueKernels.h"
#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"

using namespace tp;
using tp::test::Epilogue;

namespace {

struct Built {
  std::string ptx;
  rt::ResourceUsage u;
};

/// Lesson 08's gemm with epilogue `e` through NVRTC for sm_90a: the variant that stores C by
/// TMA (`registers` false: what aligned outputs take), or the ones storing it from registers:
/// the general one, or the one a launch whose output rows are even takes
/// (passes::Target::even_rows).
Built build(const Epilogue& e, bool even_rows = false, bool registers = false) {
  const Kernel k = test::epilogue_gemm({}, e);
  passes::Target t = passes::Target::parse("sm_90a");
  if (registers) t.tma_store_params = 0;
  cuda::LoweredKernel lk = cuda::lower_kernel(k, t);
  if (even_rows) {
    EXPECT_NE(lk.paired_params, 0u) << "the output takes paired stores";
    t.even_rows = lk.paired_params;
    lk = cuda::lower_kernel(k, t);
  }
  rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, "sm_90a", {}, true);
  EXPECT_FALSE(j.compiled.cubin.empty()) << j.compiled.log;
  return {j.compiled.ptx, rt::resource_usage(j.compiled.log, lk.entry)};
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
    ++n;
  return n;
}

// Bias + GELU compiles like the plain GEMM: no spill, the same registers (both at the cap, so
// the bound is equality), the wgmma not serialized, and its 128 quotients per thread are
// div.full (branch-free), not the IEEE div.rn whose slow-path branch made ptxas run the
// epilogue one element after another (lesson 08 at 0.65x of lesson 07 on the H200).
TEST(EpilogueCudaCompile, BiasGeluCompilesLikeThePlainGemm) {
  Built plain = build({});
  Built bg = build({.bias = true, .gelu = true});
  ASSERT_GT(plain.u.registers, 0) << plain.u.raw;
  EXPECT_EQ(plain.u.spill_store_bytes + plain.u.spill_load_bytes, 0) << plain.u.raw;
  EXPECT_EQ(bg.u.spill_store_bytes + bg.u.spill_load_bytes, 0) << bg.u.raw;
  EXPECT_LE(bg.u.registers, plain.u.registers) << bg.u.raw;
  EXPECT_FALSE(bg.u.wgmma_serialized) << bg.u.raw;
  EXPECT_EQ(count(bg.ptx, "div.rn.f32"), 0u);
  EXPECT_EQ(count(bg.ptx, "div.full.f32"), 128u); // one per accumulator register (bn*bm/256)
  EXPECT_EQ(count(bg.ptx, "ex2.approx"), 128u);
}

// The full epilogue (bias, GELU, scale, residual) compiles without a spill too: the residual
// is read where it is added (SinkFragmentLoads), not held in 128 more registers.
TEST(EpilogueCudaCompile, ResidualEpilogueCompilesWithoutSpills) {
  Built plain = build({});
  Built full = build({.bias = true, .gelu = true, .scale = true, .residual = true});
  EXPECT_EQ(full.u.spill_store_bytes + full.u.spill_load_bytes, 0) << full.u.raw;
  EXPECT_LE(full.u.registers, plain.u.registers) << full.u.raw;
  EXPECT_FALSE(full.u.wgmma_serialized) << full.u.raw;
  EXPECT_EQ(count(full.ptx, "div.rn.f32"), 0u);
}

} // namespace

// Of the variants storing C from registers, the even-row one keeps the 64 two-element global
// stores a thread issues and drops every element store of the fallbacks: the pass's (index not
// even) and store2's own (address not aligned). It needs no more registers. The TMA-store
// variant issues no global store from the consumers at all.
TEST(EpilogueCudaCompile, EvenRowsKeepThePairsAndDropTheElementStores) {
  // Global stores of 16-bit elements: pairs (one 32-bit word) and single elements.
  auto pairs = [](const std::string& ptx) {
    return count(ptx, "st.global.b32") + count(ptx, "st.global.u32");
  };
  auto elements = [](const std::string& ptx) {
    return count(ptx, "st.global.b16") + count(ptx, "st.global.u16");
  };
  for (const Epilogue& e : {Epilogue{}, Epilogue{.bias = true, .gelu = true}}) {
    Built general = build(e, false, true), even = build(e, true, true), tma = build(e);
    EXPECT_EQ(pairs(tma.ptx) + elements(tma.ptx), 0u);
    EXPECT_EQ(count(tma.ptx, "cp.async.bulk.tensor.2d.global.shared::cta"), 4u)
        << "one TMA store a 64-column chunk";
    EXPECT_EQ(pairs(general.ptx), 64u) << "bm * bn / 256 threads / 2";
    EXPECT_EQ(elements(general.ptx), 256u) << "two fallbacks of two stores per pair";
    EXPECT_EQ(pairs(even.ptx), 64u);
    EXPECT_EQ(elements(even.ptx), 0u);
    EXPECT_LE(even.u.registers, general.u.registers) << even.u.raw;
    EXPECT_EQ(even.u.spill_store_bytes + even.u.spill_load_bytes, 0) << even.u.raw;
    EXPECT_FALSE(even.u.wgmma_serialized) << even.u.raw;
  }
}
