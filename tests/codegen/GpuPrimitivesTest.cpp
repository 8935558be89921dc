// GPU test (ctest label gpu): the primitives kernel (PrimitivesKernel.h) gives the same results
// on the CUDA backend as on the interpreter: every dtype conversion, bit operator, int4 load and
// converting copy exactly (NaN matches any NaN: its fp8 bit pattern is not specified), and the
// math functions within CUDA's documented error (tanh, erf 2 ulp; pow, sigmoid 4 ulp); and a
// pipelined loop over fp8 / i8 / u8 tiles (TMA-loaded as UINT8 boxes, the last block past the
// tensor's rows) sums exactly the same values.
#include <gtest/gtest.h>

#include "PrimitivesKernel.h"
#include "codegen/cpu/Interpreter.h"
#include "compile/CudaKernel.h"
#include "ops/CudaCheck.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::test;

TEST(GpuPrimitives, CudaMatchesTheInterpreter) {
  Kernel k = primitives_kernel();
  std::vector<HostTensor> cpu = primitives_args(7), gpu = primitives_args(7);
  std::vector<HostTensor*> p;
  for (HostTensor& h : cpu)
    p.push_back(&h);
  cpu::interpret(k, p);

  rt::ensure_context();
  ops::DeviceArgs d = ops::DeviceArgs::upload(gpu);
  cuda::CudaKernel ck(k, ops::device_arch());
  ck.launch(d.tensors);
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  std::vector<int> outs;
  for (int i = kPrimFirstOutput; i < kPrimArgs; ++i)
    outs.push_back(i);
  d.download(gpu, outs);

  const char* names[] = {"Bits", "O4", "O5", "Fp", "I8", "U8", "Qo", "Math", "Copy"};
  const int64_t math_ulps[] = {2, 2, 4, 4}; // tanh, erf, sigmoid, pow
  for (int a : outs) {
    int bad = 0;
    for (int64_t i = 0; i < cpu[a].numel(); ++i) {
      double c = cpu[a].get(i), g = gpu[a].get(i);
      bool ok = a == pMath ? ulp_distance(static_cast<float>(c), static_cast<float>(g)) <=
                                 math_ulps[i / kPrimN]
                           : same_value(c, g);
      if (!ok && bad++ < 5)
        ADD_FAILURE() << names[a - kPrimFirstOutput] << " row " << i / kPrimN << " element "
                      << i % kPrimN << ": cuda " << g << ", interpreter " << c;
    }
    EXPECT_EQ(bad, 0) << names[a - kPrimFirstOutput];
    // Nothing was left unwritten (poison survives only where the expected value is NaN).
    for (int64_t i = 0; i < gpu[a].numel(); ++i)
      if (std::isnan(gpu[a].get(i)))
        ASSERT_TRUE(std::isnan(cpu[a].get(i))) << names[a - kPrimFirstOutput];
  }
}

TEST(GpuPrimitives, OneByteTmaPipelineMatchesTheInterpreter) {
  for (DType t : {fp8_e4m3, i8, u8}) {
    Kernel k = one_byte_pipeline_kernel(t);
    // 100 rows: the second block's TMA box runs past the end (zero fill); 192-byte rows keep
    // the TMA variant (rows must be 16-byte multiples).
    std::vector<HostTensor> cpu = {HostTensor(t, {100, 192}), HostTensor(f32, {100, 64})};
    cpu[0].fill_random(3, t == u8 ? 0 : -4, 4);
    cpu[1].poison();
    std::vector<HostTensor> gpu = cpu;
    cpu::interpret(k, {&cpu[0], &cpu[1]});
    rt::ensure_context();
    ops::DeviceArgs d = ops::DeviceArgs::upload(gpu);
    cuda::CudaKernel ck(k, ops::device_arch());
    ASSERT_EQ(ck.lowered(true).tmas.size(), 1u) << dtype_name(t);
    ck.launch(d.tensors);
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    d.download(gpu, {1});
    int bad = 0;
    for (int64_t i = 0; i < cpu[1].numel(); ++i)
      if (!same_value(cpu[1].get(i), gpu[1].get(i)) && bad++ < 5)
        ADD_FAILURE() << dtype_name(t) << " C[" << i / 64 << ", " << i % 64 << "]: cuda "
                      << gpu[1].get(i) << ", interpreter " << cpu[1].get(i);
    EXPECT_EQ(bad, 0) << dtype_name(t);
    EXPECT_FALSE(std::isnan(cpu[1].get(99 * 64 + 63))) << "the last row was not written";
  }
}
