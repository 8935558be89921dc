// GEMM + bias + GELU + scale + residual (tests/support/GemmEpilogueKernels.h) through the public
// API: the interpreter against an fp64 reference (CPU, CI), and CUDA against the interpreter at
// odd and tile-aligned shapes (GPU suite, H200), in lesson 08's GPU config and a 64 x 64 one.
// Outputs are bf16 (2^-8 relative); the f32 sums run in a different order per backend and the
// GPU's exp and quotient are within a few ulp, so values agree to kAtol + kRtol |value|.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "GemmEpilogueKernels.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using tp::test::Epilogue;
using tp::test::EpilogueTiles;

namespace {

constexpr double kAtol = 4e-3, kRtol = 1.0 / 64;
constexpr double kAlpha = 0.75;
const Epilogue kFull{.bias = true, .gelu = true, .scale = true, .residual = true};

struct Problem {
  HostTensor a, b, bias, r, c;
  Problem(int64_t M, int64_t N, int64_t K, uint64_t seed)
      : a(bf16, {M, K}), b(bf16, {K, N}), bias(bf16, {N}), r(bf16, {M, N}), c(bf16, {M, N}) {
    a.fill_random(seed), b.fill_random(seed + 1), bias.fill_random(seed + 2);
    r.fill_random(seed + 3), c.poison();
  }
};

/// How many elements of got differ from want by more than the tolerance (NaN counts); the
/// first few are reported.
int64_t mismatches(const HostTensor& got, const std::vector<double>& want,
                   const std::vector<int64_t>& at, const std::string& what) {
  int64_t bad = 0;
  for (size_t n = 0; n < at.size(); ++n) {
    double g = got.get(at[n]), w = want[n];
    if (!(std::fabs(g - w) <= kAtol + kRtol * std::fabs(w)) && bad++ < 5)
      ADD_FAILURE() << what << ": element " << at[n] << " is " << g << ", want " << w;
  }
  return bad;
}

std::vector<int64_t> every(int64_t n) {
  std::vector<int64_t> at(n);
  for (int64_t i = 0; i < n; ++i)
    at[i] = i;
  return at;
}

TEST(GemmEpilogue, InterpreterMatchesTheReference) {
  Problem p(77, 45, 133, 11);
  interpret(test::epilogue_gemm({64, 64, 32, 2, 128}, kFull), {p.a, p.b, p.bias, p.r, kAlpha, p.c});
  std::vector<int64_t> at = every(77 * 45);
  EXPECT_EQ(mismatches(p.c, test::epilogue_reference(kFull, p.a, p.b, &p.bias, &p.r, kAlpha, at),
                       at, "interpreter"),
            0);
}

class GpuGemmEpilogue : public testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t>> {};

TEST_P(GpuGemmEpilogue, CudaAgreesWithTheInterpreter) {
  auto [M, N, K] = GetParam();
  for (EpilogueTiles t : {EpilogueTiles{}, EpilogueTiles{64, 64, 32, 2, 128}}) {
    SCOPED_TRACE(std::to_string(t.bm) + "x" + std::to_string(t.bn) + " tiles");
    Kernel k = test::epilogue_gemm(t, kFull);
    Problem cpu(M, N, K, 21), gpu(M, N, K, 21);
    interpret(k, {cpu.a, cpu.b, cpu.bias, cpu.r, kAlpha, cpu.c});
    DeviceArray da = DeviceArray::from(gpu.a), db = DeviceArray::from(gpu.b);
    DeviceArray dbias = DeviceArray::from(gpu.bias), dr = DeviceArray::from(gpu.r);
    DeviceArray dc = DeviceArray::from(gpu.c); // poisoned
    compile(k).launch({da, db, dbias, dr, kAlpha, dc});
    synchronize();
    HostTensor got = dc.to_host();
    std::vector<int64_t> at = every(M * N);
    std::vector<double> want(at.size());
    for (size_t i = 0; i < at.size(); ++i)
      want[i] = cpu.c.get(at[i]);
    EXPECT_EQ(mismatches(got, want, at, "cuda vs interpreter"), 0);
  }
}

// Odd extents (edge tiles in every dimension, rows not 16-byte aligned: the non-TMA variant)
// and tile-aligned ones (the TMA, warp-specialized path over several tiles in M and N).
INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemmEpilogue,
                         testing::Values(std::make_tuple(77, 45, 133),
                                         std::make_tuple(1024, 1024, 512),
                                         std::make_tuple(4096, 4096, 64)));

} // namespace
