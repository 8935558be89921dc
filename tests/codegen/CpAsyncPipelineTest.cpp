// The cp.async multistage pipeline through the CUDA backend:
//   CudaCompileCpAsync.*   the gemm operator at sm_80 with 2..4 stages and a GEMV with a 1-d
//                          shared tile at sm_90a and sm_80 lower to cp.async code that NVRTC and
//                          ptxas compile without spilling (no GPU needed);
//   GpuCpAsync.*           the interpreter and the GPU agree element by element at odd shapes
//                          (K not a multiple of bk, leading dimensions not 16-byte aligned). An
//                          sm_80 cubin does not load on an sm_90a device, so the GPU runs the
//                          sm_90a code that takes the cp.async plan: the gemm's variant without
//                          TMA (launched when a tensor's rows are not 16-byte aligned) and the
//                          GEMV, whose 1-d tile TMA does not take. sm_80 is compile-only here.
#include <gtest/gtest.h>

#include <tuple>

#include "DifferentialCases.h"
#include "PipelinedGemv.h"
#include "codegen/cpu/Interpreter.h"
#include "codegen/cuda/LoweredKernel.h"
#include "compile/CudaKernel.h"
#include "compile/Lower.h"
#include "ops/CudaCheck.h"
#include "ops/gemm/GemmOp.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"

using namespace tp;
using namespace tp::difftest;

namespace {

Kernel gemm_op(int stages, int64_t bk = 32) {
  return ops::gemm_kernel(
      DType::bf16, "nn",
      {{"bm", 128}, {"bn", 128}, {"bk", bk}, {"stages", stages}, {"threads", 128}});
}

Kernel gemv(int stages) {
  return tp::testing::pipelined_gemv(stages);
}

void expect_cp_async_compiles(const Kernel& k, const std::string& arch, int stages) {
  cuda::LoweredKernel lk = cuda::lower_kernel(k, passes::Target::parse(arch));
  EXPECT_NE(lk.source.find("tp::sm80::cp_async_chunk<2, 8>"), std::string::npos) << arch;
  EXPECT_NE(lk.source.find("tp::sm80::cp_async_wait<" + std::to_string(stages - 2) + ">"),
            std::string::npos)
      << arch;
  rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, arch, {}, true);
  ASSERT_FALSE(j.compiled.cubin.empty()) << arch << "\n" << j.compiled.log;
  rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
  EXPECT_GT(u.registers, 0) << j.compiled.log;
  EXPECT_EQ(u.spill_store_bytes, 0) << arch << " stages " << stages;
}

TEST(CudaCompileCpAsync, GemmOperatorAtSm80CompilesForTwoToFourStages) {
  for (int s : {2, 3, 4})
    expect_cp_async_compiles(gemm_op(s), "sm_80", s);
  expect_cp_async_compiles(gemm_op(3, 64), "sm_80", 3);
}

TEST(CudaCompileCpAsync, GemvWithOneDimensionalTileCompilesAtSm90aAndSm80) {
  expect_cp_async_compiles(gemv(3), "sm_90a", 3);
  expect_cp_async_compiles(gemv(2), "sm_80", 2);
}

// --- GPU ----------------------------------------------------------------------------------------

std::vector<HostTensor*> pointers(std::vector<HostTensor>& v) {
  std::vector<HostTensor*> p;
  for (HostTensor& t : v)
    p.push_back(&t);
  return p;
}

/// Runs k on the interpreter and, compiled for `arch`, on the GPU; outputs start as a sentinel.
void expect_gpu_matches_interpreter(const Kernel& k, const std::string& arch,
                                    std::vector<HostTensor> args, int output) {
  std::vector<HostTensor> cpu_out = args, gpu_out = args;
  cpu::interpret(k, pointers(cpu_out));
  rt::ensure_context();
  ops::DeviceArgs d = ops::DeviceArgs::upload(gpu_out);
  cuda::CudaKernel ck(k, arch);
  ck.launch(d.tensors);
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  d.download(gpu_out, {output});
  EXPECT_EQ(first_mismatch(gpu_out[output], cpu_out[output], 0), "") << arch;
}

// Small integers: every product and partial sum is exact in f32, so both sides agree exactly.
// 77 x 45 x 133: partial tiles in M, N and K (133 = 4 x 32 + 5), and rows of 133 and 45 bf16
// that are not 16-byte aligned (the 8-, 4-byte and element chunks); 136 x 204 x 200: A's rows
// (400 B) take the 16-byte chunks with zero-fill, B's (408 B) are what keeps TMA out.
TEST(GpuCpAsync, GemmWithoutTmaMatchesTheInterpreterAtOddShapes) {
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{77, 45, 133}, {136, 204, 200}})
    for (int s : {2, 3, 4}) {
      ASSERT_NE(N * 2 % 16, 0) << "the shape must keep the launch off the TMA variant";
      std::vector<HostTensor> args = {ints(bf16, {M, K}, 1), ints(bf16, {K, N}, 2),
                                      sentinel(bf16, {M, N})};
      SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                   " stages " + std::to_string(s));
      cuda::CudaKernel probe(gemm_op(s), "sm_90a");
      ASSERT_NE(probe.lowered(false).source.find("tp::sm80::cp_async_wait<"), std::string::npos);
      expect_gpu_matches_interpreter(gemm_op(s), "sm_90a", args, 2);
    }
}

TEST(GpuCpAsync, GemvMatchesTheInterpreterAtSm90a) {
  for (int64_t K : {333, 320})
    for (int s : {2, 3}) {
      std::vector<HostTensor> args = {ints(bf16, {77, K}, 3), ints(bf16, {K}, 4),
                                      sentinel(f32, {77})};
      SCOPED_TRACE("K " + std::to_string(K) + " stages " + std::to_string(s));
      expect_gpu_matches_interpreter(gemv(s), "sm_90a", args, 2);
    }
}

} // namespace
