// Epilogues on a wgmma accumulator (issue 19): what InferLayouts decides for the fragments of
// the element-wise work between the K loop and the store, and what lowering adds for it
// (shared memory, barriers), measured against the same GEMM without the epilogue.
#include <gtest/gtest.h>

#include "GemmEpilogueKernels.h"
#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ir/IRVisitor.h"
#include "passes/InferLayouts.h"

using namespace tp;
using tp::test::Epilogue;
using tp::test::EpilogueTiles;
using Kind = passes::FragmentLayout::Kind;

namespace {

passes::Target sm90() {
  return passes::Target::parse("sm_90a");
}

/// The fragments in allocation order (acc first, then the epilogue's).
std::vector<ir::Buffer> fragments(const Kernel& k) {
  std::vector<ir::Buffer> out;
  ir::for_each_stmt(k.node().body, [&](const ir::Stmt& s) {
    if (const auto* a = ir::as<ir::Allocate>(s))
      if (a->buffer->scope == ir::Scope::fragment) out.push_back(a->buffer);
  });
  return out;
}

/// Block-wide barriers InsertBarriers placed in the lowered kernel.
int barriers(const cuda::LoweredKernel& lk) {
  int n = 0;
  ir::for_each_stmt(lk.body_with_barriers, [&](const ir::Stmt& s) {
    if (const auto* e = ir::as<ir::Evaluate>(s))
      if (const auto* i = ir::as<ir::Intrinsic>(e->value)) n += i->name == "tp.barrier";
  });
  return n;
}

// Scaling by a scalar, GELU and a residual read as r(i, j): every fragment is in registers, the
// residual in the accumulator's own layout (each thread reads the elements it adds), nothing
// is promoted to shared memory.
TEST(EpilogueLayouts, ElementwiseEpilogueFragmentsShareTheAccumulatorLayout) {
  Kernel k = test::epilogue_gemm({}, {.gelu = true, .scale = true, .residual = true});
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  std::vector<ir::Buffer> f = fragments(k);
  ASSERT_EQ(f.size(), 2u);
  const passes::FragmentLayout& acc = l.fragment(f[0]);
  EXPECT_EQ(acc.kind, Kind::wgmma_acc);
  ASSERT_TRUE(l.in_registers(f[1])) << l.shared_reason[f[1]->uid];
  EXPECT_TRUE(l.fragment(f[1]).same_as(acc)) << l.fragment(f[1]).str();
  EXPECT_TRUE(l.promoted.empty());
  EXPECT_TRUE(l.reduce_scratch.empty());
}

// Lowered, the same epilogue adds no shared memory and no barrier to the plain GEMM, and the
// warp-specialized TMA pipeline stays (its smem holds exactly the plain GEMM's stages).
TEST(EpilogueLayouts, RegisterEpilogueAddsNoSharedMemoryAndNoBarrier) {
  EpilogueTiles t;
  cuda::LoweredKernel plain = cuda::lower_kernel(test::epilogue_gemm(t, {}), sm90());
  for (Epilogue e : {Epilogue{.scale = true}, Epilogue{.gelu = true},
                     Epilogue{.gelu = true, .scale = true, .residual = true}}) {
    cuda::LoweredKernel lk = cuda::lower_kernel(test::epilogue_gemm(t, e), sm90());
    SCOPED_TRACE(lk.lowered_text.substr(0, 600));
    EXPECT_EQ(lk.smem_bytes, plain.smem_bytes);
    EXPECT_EQ(barriers(lk), barriers(plain));
    EXPECT_EQ(lk.block_threads, plain.block_threads); // the producer warpgroup is still there
    EXPECT_NE(lk.lowered_text.find("warp-specialized"), std::string::npos);
  }
}

// The bias, read as b(j) next to the accumulator, is a column vector of a wgmma layout: each
// thread would need N/4 registers (64 at bn = 256, beside the accumulator's 128, past the 168
// ptxas has per thread at 384 threads), so it stays in shared memory, loaded once per tile,
// with one barrier between its load and the epilogue. This pins that decision and its cost.
TEST(EpilogueLayouts, BiasColumnVectorOfAnAccumulatorIsSharedBehindOneBarrier) {
  EpilogueTiles t;
  Kernel k = test::epilogue_gemm(t, {.bias = true, .gelu = true});
  passes::LayoutInfo l = passes::infer_layouts(k.node(), sm90());
  std::vector<ir::Buffer> f = fragments(k);
  ASSERT_EQ(f.size(), 2u);
  ASSERT_TRUE(l.in_shared(f[1]));
  EXPECT_NE(l.shared_reason.at(f[1]->uid).find("column vector"), std::string::npos)
      << l.shared_reason.at(f[1]->uid);
  cuda::LoweredKernel plain = cuda::lower_kernel(test::epilogue_gemm(t, {}), sm90());
  cuda::LoweredKernel lk = cuda::lower_kernel(k, sm90());
  EXPECT_EQ(lk.smem_bytes, plain.smem_bytes + t.bn * 4); // the f32 vector, nothing else
  EXPECT_EQ(barriers(lk), barriers(plain) + 1);
}

} // namespace
