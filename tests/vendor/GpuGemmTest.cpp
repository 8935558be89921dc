// GPU checks (label gpu) of the two GEMM references against GemmOp's fp64 CPU reference: cuBLASLt
// (our row-major to column-major mapping, every layout and dtype, odd shapes) and the fp32 GPU
// reference gemm. Outputs are poisoned (NaN) before each run; NaN never passes.
#include <gtest/gtest.h>
#include <iostream>

#include "VendorTestUtil.h"
#include "ops/gemm/GemmOp.h"
#include "ops/reference/GpuReference.h"
#include "ops/vendor/CublasLt.h"
#include "runtime/Driver.h"
#include "runtime/Launch.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Shape {
  int64_t M, N, K;
};
// M=1 and odd N/K catch a transposed or mis-strided mapping; 257x129 spans partial tiles.
const Shape kShapes[] = {{1, 45, 133}, {77, 45, 133}, {128, 256, 64}, {257, 129, 1000}};

Problem gemm_problem(DType t, const std::string& layout, const Shape& s) {
  return find_operator("gemm").parse({{"M", std::to_string(s.M)},
                                      {"N", std::to_string(s.N)},
                                      {"K", std::to_string(s.K)},
                                      {"layout", layout}},
                                     t);
}

std::vector<double> fp64_reference(const Problem& p, const std::vector<HostTensor>& args) {
  Box all{2, {0, 0}, {p.at("M"), p.at("N")}};
  return find_operator("gemm").reference(p, args, all);
}

} // namespace

TEST(GpuCublasLt, MatchesTheFp64ReferenceForEveryLayoutAndDtype) {
  std::string why;
  ASSERT_TRUE(cublaslt_available(&why)) << why;
  CublasLtGemm lt;
  std::cout << "using " << lt.library().describe() << "\n";
  int failures = 0;
  for (DType t : {DType::bf16, DType::f16})
    for (const char* layout : {"nn", "nt", "tn"})
      for (const Shape& s : kShapes) {
        Problem p = gemm_problem(t, layout, s);
        std::vector<HostTensor> args = find_operator("gemm").make_args(p, 7);
        rt::DeviceBuffer A = test::upload(args[0]), B = test::upload(args[1]);
        rt::DeviceBuffer C = test::poisoned(args[2].bytes());
        lt.run(p, A.ptr(), B.ptr(), C.ptr());
        TILEPILOT_CU(rt::driver().cuCtxSynchronize());
        auto [atol, rtol] = find_operator("gemm").tolerance(t);
        auto cmp = test::compare(
            fmt::format("cuBLASLt {} {} {}", dtype_name(t), layout, p.shape_str()),
            fp64_reference(p, args), download_as_f32(C.ptr(), size_t(s.M * s.N), t), atol, rtol);
        if (!cmp.passed) {
          ++failures;
          ADD_FAILURE() << cmp.report
                        << "\n  (algorithm: " << lt.algorithm(t, layout, s.M, s.N, s.K) << ")";
        }
      }
  EXPECT_EQ(failures, 0) << "cuBLASLt cases failed; see above. A failure in every nt or tn case "
                            "points at the row-major mapping in CublasLt.cpp";
}

TEST(GpuCublasLt, RepeatedRunsReuseTheCachedPlanAndStream) {
  CublasLtGemm lt;
  rt::Stream stream;
  Problem p = gemm_problem(DType::bf16, "nt", {64, 64, 64});
  std::vector<HostTensor> args = find_operator("gemm").make_args(p, 3);
  rt::DeviceBuffer A = test::upload(args[0]), B = test::upload(args[1]);
  rt::DeviceBuffer C = test::poisoned(args[2].bytes());
  for (int i = 0; i < 3; ++i)
    lt.run(p, A.ptr(), B.ptr(), C.ptr(), stream.get());
  stream.synchronize();
  auto cmp = test::compare("cuBLASLt on a stream", fp64_reference(p, args),
                           download_as_f32(C.ptr(), 64 * 64, DType::bf16), 2e-2, 2e-2);
  EXPECT_TRUE(cmp.passed) << cmp.report;
}

TEST(GpuCublasLt, MisalignedPointersAreRejectedWithAMessage) {
  CublasLtGemm lt;
  rt::DeviceBuffer buf(1 << 16);
  try {
    lt.run(DType::bf16, "nn", 8, 8, 8, buf.ptr() + 1, buf.ptr(), buf.ptr());
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("2-byte element size"), std::string::npos) << e.what();
  }
}

TEST(GpuReferenceGemm, MatchesTheFp64ReferenceForEveryLayoutAndDtype) {
  int failures = 0;
  for (DType t : {DType::bf16, DType::f16})
    for (const char* layout : {"nn", "nt", "tn"})
      for (const Shape& s : kShapes) {
        Problem p = gemm_problem(t, layout, s);
        std::vector<HostTensor> args = find_operator("gemm").make_args(p, 11);
        rt::DeviceBuffer A = test::upload(args[0]), B = test::upload(args[1]);
        rt::DeviceBuffer C = test::poisoned(size_t(s.M * s.N) * sizeof(float));
        gpu_reference_gemm(t, layout, s.M, s.N, s.K, A.ptr(), B.ptr(), C.ptr());
        TILEPILOT_CU(rt::driver().cuCtxSynchronize());
        // f32 accumulation of exact products: error ~ K * 2^-24 * |terms|.
        auto cmp = test::compare(
            fmt::format("GPU reference gemm {} {} {}", dtype_name(t), layout, p.shape_str()),
            fp64_reference(p, args), download_f32(C.ptr(), size_t(s.M * s.N)), 1e-3, 1e-4);
        if (!cmp.passed) {
          ++failures;
          ADD_FAILURE() << cmp.report;
        }
      }
  EXPECT_EQ(failures, 0);
}
