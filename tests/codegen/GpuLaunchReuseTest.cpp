// A CudaKernel reuses the last launch's TMA tensor maps while its tensors are unchanged, and the
// dynamic shared-memory opt-in is set once per function. Both caches must follow new buffers: a
// kernel launched on A, then on B, then on A again writes the right outputs each time.
#include <gtest/gtest.h>

#include "DifferentialCases.h"
#include "codegen/cpu/Interpreter.h"
#include "compile/CudaKernel.h"
#include "ops/CudaCheck.h"
#include "ops/gemm/GemmOp.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::difftest;

namespace {

TEST(GpuLaunchReuse, NewBuffersGetNewTensorMaps) {
  // The default sm_90a GEMM: TMA-loaded A and B, over 48 KiB of shared memory.
  Kernel k = ops::gemm_kernel(
      DType::bf16, "nn", {{"bm", 128}, {"bn", 256}, {"bk", 64}, {"stages", 4}, {"threads", 256}});
  const int64_t M = 256, N = 256, K = 128;
  auto inputs = [&](uint64_t seed) {
    return std::vector<HostTensor>{ints(bf16, {M, K}, seed), ints(bf16, {K, N}, seed + 1),
                                   sentinel(bf16, {M, N})};
  };
  std::vector<HostTensor> a = inputs(1), b = inputs(5), want_a = a, want_b = b;
  std::vector<HostTensor*> pa, pb;
  for (auto& t : want_a)
    pa.push_back(&t);
  for (auto& t : want_b)
    pb.push_back(&t);
  cpu::interpret(k, pa);
  cpu::interpret(k, pb);
  rt::ensure_context();
  ops::DeviceArgs da = ops::DeviceArgs::upload(a), db = ops::DeviceArgs::upload(b);
  cuda::CudaKernel ck(k, "sm_90a");
  for (int round = 0; round < 3; ++round) {
    const bool on_a = round != 1;
    ops::DeviceArgs& d = on_a ? da : db;
    std::vector<HostTensor>& host = on_a ? a : b;
    d.buffers[2].upload(host[2].data(), host[2].bytes()); // the sentinel again
    ck.launch(d.tensors);
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    d.download(host, {2});
    EXPECT_EQ(first_mismatch(host[2], (on_a ? want_a : want_b)[2], 0), "") << "round " << round;
  }
}

} // namespace
