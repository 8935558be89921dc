// A pipelined GEMV that asks for copies = cp_async has its fragment loads staged through shared
// memory (passes/StageFragmentLoads.h), in a version of the loop taken when A's rows are 16-byte
// aligned, and the original serial loop otherwise. Both versions, at 2 and 3 stages, at K that
// selects each (4096 and 64: aligned, 64 shorter than the pipeline; 4095 and 333: not), write
// exactly what the interpreter writes. Inputs are small integers, so every f32 sum is exact.
#include <gtest/gtest.h>

#include "DifferentialCases.h"
#include "codegen/cpu/Interpreter.h"
#include "compile/CudaKernel.h"
#include "ops/CudaCheck.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::difftest;

namespace {

Kernel staged_gemv(int stages) {
  const int64_t bm = 16, bk = 256;
  Dim M("M"), K("K");
  Tensor A("A", {M, K}, bf16), X("x", {K}, bf16), Y("y", {M}, f32);
  return kernel("staged_gemv", {A, X, Y}, grid(ceildiv(M, bm)), threads(256), [&](Var by) {
    Tile a = alloc_fragment({bm, bk}, f32), x = alloc_fragment({bk}, f32);
    Tile part = alloc_fragment({bm, bk}, f32), y = alloc_fragment({bm}, f32);
    clear(part);
    pipelined(ceildiv(K, bk), {.stages = stages, .copies = Schedule::Copies::cp_async}, [&](Var k) {
      copy(A.tile(by * bm, k * bk), a);
      copy(X.tile(k * bk), x);
      parallel({bm, bk}, [&](Var i, Var j) { part(i, j) = part(i, j) + a(i, j) * x(j); });
    });
    reduce_sum(part, y, 1);
    copy(y, Y.tile(by * bm));
  });
}

TEST(GpuStagedFragmentLoads, BothVersionsMatchTheInterpreter) {
  rt::ensure_context();
  for (int stages : {2, 3}) {
    Kernel k = staged_gemv(stages);
    cuda::CudaKernel ck(k, "sm_90a");
    for (int64_t K : {4096, 64, 4095, 333}) {
      const int64_t M = 77;
      std::vector<HostTensor> args = {ints(bf16, {M, K}, 1), ints(bf16, {K}, 2),
                                      sentinel(f32, {M})};
      std::vector<HostTensor> want = args;
      std::vector<HostTensor*> pw;
      for (auto& t : want)
        pw.push_back(&t);
      cpu::interpret(k, pw);
      ops::DeviceArgs d = ops::DeviceArgs::upload(args);
      ck.launch(d.tensors);
      TILEPILOT_CU(rt::driver().cuCtxSynchronize());
      d.download(args, {2});
      EXPECT_EQ(first_mismatch(args[2], want[2], 0), "") << "stages " << stages << " K " << K;
    }
  }
}

} // namespace
