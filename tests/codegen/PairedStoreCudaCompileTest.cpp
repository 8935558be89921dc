// The even-row variant of the paired accumulator store (passes::Target::even_rows) through NVRTC
// for sm_90a, no GPU needed: lesson 08's GEMM (128 x 256 tiles, 4 stages, 256 consumer threads)
// with and without its bias + GELU epilogue. The variant keeps the 64 two-element global stores
// a thread issues and drops every element store of the fallbacks (the pass's, and store2's own
// test of the address), and needs no more registers.
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

/// Compiles the kernel for sm_90a, with the output's rows even (`even`) or not.
Built build(const Kernel& k, bool even) {
  passes::Target t = passes::Target::parse("sm_90a");
  cuda::LoweredKernel general = cuda::lower_kernel(k, t);
  t.even_rows = even ? general.paired_params : 0;
  EXPECT_NE(general.paired_params, 0u) << "the output takes paired stores";
  cuda::LoweredKernel lk = even ? cuda::lower_kernel(k, t) : general;
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

/// Global stores of 16-bit elements: pairs (one 32-bit word) and single elements.
struct Stores {
  size_t pairs, elements;
};
Stores stores(const std::string& ptx) {
  return {count(ptx, "st.global.b32") + count(ptx, "st.global.u32"),
          count(ptx, "st.global.b16") + count(ptx, "st.global.u16")};
}

} // namespace

TEST(PairedStoreCudaCompile, EvenRowsKeepThePairsAndDropTheElementStores) {
  for (const Epilogue& e : {Epilogue{}, Epilogue{.bias = true, .gelu = true}}) {
    Kernel k = test::epilogue_gemm({}, e);
    Built general = build(k, false), even = build(k, true);
    Stores g = stores(general.ptx), v = stores(even.ptx);
    EXPECT_EQ(g.pairs, 64u) << "bm * bn / 256 threads / 2";
    EXPECT_EQ(g.elements, 256u) << "two fallbacks (index, then address) of two stores per pair";
    EXPECT_EQ(v.pairs, 64u);
    EXPECT_EQ(v.elements, 0u);
    EXPECT_LE(even.u.registers, general.u.registers) << even.u.raw;
    EXPECT_EQ(even.u.spill_store_bytes + even.u.spill_load_bytes, 0) << even.u.raw;
    EXPECT_FALSE(even.u.wgmma_serialized) << even.u.raw;
  }
}
