// The canonical printer: kernels that differ only in names print identically (the cache key
// depends on it), and any semantic change changes the text.
#include <gtest/gtest.h>

#include "ir/IRPrinter.h"
#include "ops/gemm/GemmOp.h"

using namespace tp;

namespace {
Kernel scale_kernel(const std::string& a_name, const std::string& dim, float factor) {
  Dim M(dim);
  Tensor A(a_name, {M}, f32), B("out", {M}, f32);
  return kernel("scale_" + a_name, {A, B}, grid(ceildiv(M, 64)), threads(64), [&](Var bx) {
    Tile t = alloc_fragment({64}, f32);
    copy(A.tile(bx * 64), t);
    parallel({64}, [&](Var i) { t(i) = t(i) * factor; });
    copy(t, B.tile(bx * 64));
  });
}
} // namespace

TEST(Printer, CanonicalTextIgnoresNames) {
  std::string a = ir::to_string(scale_kernel("x", "M", 2.0f).node(), true);
  std::string b = ir::to_string(scale_kernel("y", "Len", 2.0f).node(), true);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.find("Len"), std::string::npos);
}

TEST(Printer, CanonicalTextSeesSemanticChanges) {
  std::string a = ir::to_string(scale_kernel("x", "M", 2.0f).node(), true);
  std::string b = ir::to_string(scale_kernel("x", "M", 3.0f).node(), true);
  EXPECT_NE(a, b);
}

TEST(Printer, SameKernelTwiceIsStable) {
  ops::Config c{{"bm", 64}, {"bn", 64}, {"bk", 32}, {"stages", 2}, {"threads", 128}};
  EXPECT_EQ(ir::to_string(ops::gemm_kernel(bf16, "nn", c).node(), true),
            ir::to_string(ops::gemm_kernel(bf16, "nn", c).node(), true));
  EXPECT_NE(ir::to_string(ops::gemm_kernel(bf16, "nn", c).node(), true),
            ir::to_string(ops::gemm_kernel(bf16, "nt", c).node(), true));
}

TEST(Printer, ReadableText) {
  std::string t = ir::to_string(scale_kernel("x", "M", 2.0f).node());
  EXPECT_NE(t.find("kernel scale_x(x: f32[M], out: f32[M]) grid(((M + 63) / 64))"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("parallel (i < 64)"), std::string::npos) << t;
}
