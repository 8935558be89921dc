// GPU test (ctest label gpu): the primitives kernel (PrimitivesKernel.h) gives the same results
// on the CUDA backend as on the interpreter: every dtype conversion, bit operator, int4 load and
// converting copy exactly (NaN matches any NaN: its fp8 bit pattern is not specified), and the
// math functions within CUDA's documented error (tanh, erf 2 ulp; pow, sigmoid 4 ulp).
#include <gtest/gtest.h>

#include "PrimitivesKernel.h"
#include "codegen/cpu/Interpreter.h"
#include "codegen/cuda/CudaKernel.h"
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
