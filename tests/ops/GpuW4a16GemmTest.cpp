// w4a16_gemm on the GPU (label gpu, sm_90a): at Llama-3-8B decode (M = 1, 16) and prefill
// (M = 2048) shapes and odd ones, the default kernel agrees with the fp64 reference on sampled
// blocks, and the kernel, the framework chain (dequantize + cuBLASLt) and its stand-in (the
// fp32 reference GEMM) each agree with the fp32 GPU reference on every element; the framework
// also agrees with the fp64 reference on the corner boxes of C. Outputs start poisoned (NaN),
// so an element left unwritten fails.
#include <gtest/gtest.h>

#include <cmath>

#include "compile/CudaKernel.h"
#include "ops/Check.h"
#include "ops/CudaCheck.h"
#include "ops/CudaProgram.h"
#include "ops/reference/GpuReference.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Case {
  std::string shape;
  DType dtype;
};

std::vector<Case> cases() {
  return {{"M=1,N=4096,K=4096", DType::bf16},     // q/o projection, decode
          {"M=16,N=28672,K=4096", DType::bf16},   // gate_up (2 x 14336), batch-16 decode
          {"M=1,N=4096,K=14336", DType::bf16},    // down projection, decode
          {"M=16,N=6144,K=4096", DType::bf16},    // fused qkv
          {"M=2048,N=4096,K=4096", DType::bf16},  // prefill
          {"M=2048,N=28672,K=4096", DType::bf16}, // prefill gate_up
          {"M=2048,N=4096,K=14336", DType::bf16}, // prefill down
          {"M=3,N=77,K=256", DType::bf16},        // ragged everything
          {"M=77,N=45,K=160,group=32", DType::bf16}, {"M=1,N=100,K=96,group=8", DType::f16}};
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_" + dtype_name(i.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

/// Elements of `got` outside atol + rtol |want| (NaN counts), with the first one described.
std::string mismatches(const std::vector<float>& got, const std::vector<float>& want, double atol,
                       double rtol) {
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i])) && bad++ == 0)
      first = static_cast<int64_t>(i);
  if (!bad) return "";
  return std::to_string(bad) + " elements off, the first at flat index " + std::to_string(first) +
         ": " + std::to_string(got[first]) + ", want " + std::to_string(want[first]);
}

class GpuW4a16Gemm : public testing::TestWithParam<Case> {
protected:
  const Operator& op() const { return find_operator("w4a16_gemm"); }
  Problem problem() const {
    return op().parse(parse_kv(GetParam().shape, "--shape"), GetParam().dtype);
  }
};

TEST_P(GpuW4a16Gemm, KernelMatchesFp64Reference) {
  CheckOptions o;
  o.seed = 11;
  CheckResult r = check_cuda(op(), problem(), o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_EQ(r.nonfinite, 0);
}

TEST_P(GpuW4a16Gemm, KernelAndFrameworkMatchTheGpuReferenceEverywhere) {
  const Problem p = problem();
  const int64_t M = p.at("M"), N = p.at("N");
  std::vector<HostTensor> args = op().make_args(p, 12);
  rt::ensure_context();
  DeviceArgs d = DeviceArgs::upload(args); // C uploads as NaN
  rt::DeviceBuffer ref32(sizeof(float) * M * N);
  ASSERT_TRUE(op().gpu_reference(p, d.tensors, {{ref32.ptr(), DType::f32, {M, N}}}, nullptr));
  const std::vector<float> want = download_f32(ref32.ptr(), M * N);
  auto [atol, rtol] = default_tolerance(op(), p);
  const CUdeviceptr c = d.tensors[3].ptr;

  const std::string arch = device_arch();
  // The default's program: one kernel, or the split kernel and its combine.
  CudaProgram prog(checked_program(op(), p, op().default_config(p, arch)), arch);
  prog.launch(d.tensors);
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  EXPECT_EQ(mismatches(download_as_f32(c, M * N, p.dtype), want, atol, rtol), "") << "kernel";

  for (bool vendor : {true, false}) {
    d.buffers[3].upload(args[3].data(), args[3].bytes()); // poisoned again
    FrameworkOptions fo;
    fo.allow_vendor = vendor;
    std::unique_ptr<Framework> fw = op().framework(p, fo);
    EXPECT_EQ(fw->name().rfind(vendor ? op().framework_name() : "dequantize kernel", 0), 0u)
        << fw->name();
    EXPECT_EQ(fw->is_vendor(), vendor) << fw->note();
    fw->run(d.tensors, nullptr);
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    EXPECT_EQ(mismatches(download_as_f32(c, M * N, p.dtype), want, atol, rtol), "") << fw->name();
  }
}

TEST_P(GpuW4a16Gemm, FrameworkMatchesFp64ReferenceAtTheCorners) {
  const Problem p = problem();
  const int64_t M = p.at("M"), N = p.at("N");
  std::vector<HostTensor> args = op().make_args(p, 13);
  rt::ensure_context();
  DeviceArgs d = DeviceArgs::upload(args);
  std::unique_ptr<Framework> fw = op().framework(p, {});
  fw->run(d.tensors, nullptr);
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  d.download(args, op().outputs(p));
  auto [atol, rtol] = default_tolerance(op(), p);
  // The first and last rows and columns of C: the fp64 reference of all of C is too slow for
  // prefill shapes, and the edges are where a layout or bounds mistake shows first.
  const int64_t nr = std::min<int64_t>(M, 8), nc = std::min<int64_t>(N, 256);
  for (int64_t r0 : {int64_t(0), M - nr})
    for (int64_t c0 : {int64_t(0), N - nc}) {
      std::vector<double> want = op().reference(p, args, Box{3, {r0, c0}, {nr, nc}});
      int64_t bad = 0;
      for (int64_t i = 0; i < nr; ++i)
        for (int64_t j = 0; j < nc; ++j) {
          double got = args[3].get((r0 + i) * N + c0 + j), w = want[i * nc + j];
          bad += !(std::fabs(got - w) <= atol + rtol * std::fabs(w));
        }
      EXPECT_EQ(bad, 0) << "box at row " << r0 << ", column " << c0 << " of " << fw->name();
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuW4a16Gemm, testing::ValuesIn(cases()), case_name);

} // namespace
