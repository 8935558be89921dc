// rmsnorm, swiglu and rope on the GPU (label gpu, sm_90a): the default kernel over the whole
// grid agrees with the fp64 reference (every block at these sizes), and so does each
// operator's torch-eager framework chain, at Llama-3-8B prefill and decode shapes and odd
// ones. Outputs start poisoned (NaN), so an element left unwritten fails.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/Check.h"
#include "ops/CudaCheck.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Case {
  std::string op, shape;
  DType dtype;
};

std::vector<Case> cases() {
  return {{"rmsnorm", "T=4096,H=4096,residual=1", DType::bf16},
          {"rmsnorm", "T=1,H=4096", DType::bf16},
          {"rmsnorm", "T=32,H=8192,residual=1", DType::bf16},
          {"rmsnorm", "T=33,H=1000,residual=1", DType::f16},
          {"rmsnorm", "T=7,H=4096", DType::f32},
          {"swiglu", "T=4096,I=14336", DType::bf16},
          {"swiglu", "T=1,I=14336", DType::bf16},
          {"swiglu", "T=33,I=1000", DType::f16},
          {"swiglu", "T=5,I=77", DType::f32},
          {"rope", "T=4096,H=32,Hkv=8,D=128", DType::bf16},
          {"rope", "T=1,H=32,Hkv=8,D=128,start=131071", DType::bf16},
          {"rope", "T=32,H=32,Hkv=8,D=128,start=8000", DType::bf16},
          {"rope", "T=33,H=5,Hkv=1,D=64", DType::f16},
          {"rope", "T=100,H=32,Hkv=32,D=128,base=10000,scaling=none", DType::bf16}};
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.op + "_" + i.param.shape + "_" + dtype_name(i.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class GpuLlamaOps : public testing::TestWithParam<Case> {
protected:
  const Operator& op() const { return find_operator(GetParam().op); }
  Problem problem() const {
    return op().parse(parse_kv(GetParam().shape, "--shape"), GetParam().dtype);
  }
};

TEST_P(GpuLlamaOps, KernelMatchesFp64Reference) {
  CheckOptions o;
  o.seed = 11;
  CheckResult r = check_cuda(op(), problem(), o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_EQ(r.blocks_run, r.blocks_total) << "the fp64 reference covers every block here";
  EXPECT_EQ(r.nonfinite, 0);
}

TEST_P(GpuLlamaOps, FrameworkMatchesFp64Reference) {
  const Problem p = problem();
  std::vector<HostTensor> args = op().make_args(p, 12);
  rt::ensure_context();
  DeviceArgs d = DeviceArgs::upload(args); // outputs upload as NaN
  std::unique_ptr<Framework> fw = op().framework(p, {});
  EXPECT_EQ(fw->name(), op().framework_name());
  fw->run(d.tensors, nullptr);
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  d.download(args, op().outputs(p));
  // The framework rounds its intermediates into the dtype as torch does: within the
  // operator's own tolerance of the fp64 result, not bit for bit.
  auto [atol, rtol] = default_tolerance(op(), p);
  for (int t : op().outputs(p)) {
    const std::vector<int64_t>& shape = args[t].shape();
    Box box{t, std::vector<int64_t>(shape.size(), 0), shape};
    std::vector<double> want = op().reference(p, args, box);
    int64_t bad = 0, first = -1;
    for (size_t i = 0; i < want.size(); ++i) {
      double got = args[t].get(static_cast<int64_t>(i));
      if (!(std::fabs(got - want[i]) <= atol + rtol * std::fabs(want[i])) && bad++ == 0)
        first = static_cast<int64_t>(i);
    }
    EXPECT_EQ(bad, 0) << "output " << t << ": " << bad << " elements off, the first at flat index "
                      << first << ": " << args[t].get(std::max<int64_t>(first, 0)) << ", want "
                      << want[std::max<int64_t>(first, 0)];
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuLlamaOps, testing::ValuesIn(cases()), case_name);

} // namespace
