// decode_attention on the GPU (label gpu, sm_90a): the default kernel over the whole grid
// agrees with the fp64 reference (every block at these sizes), and so does the torch-eager
// framework chain (SDPA's math path, with a page gather for the paged cache), at Llama-3-8B
// decode shapes (H=32, Hkv=8, D=128; contiguous and paged with 16- and 64-key pages and
// shuffled block tables; 1 and 4 query tokens; a 32k cache) and odd ones (an empty sequence,
// L=1, D=64 in f16). Outputs start poisoned (NaN), so an element left unwritten fails.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/Check.h"
#include "ops/CudaCheck.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Case {
  std::string shape;
  DType dtype;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape << " " << dtype_name(c.dtype);
}

std::vector<Case> cases() {
  const DType b = DType::bf16;
  return {{"B=4,H=32,Hkv=8,D=128,L=4096", b},
          {"B=1,H=32,Hkv=8,D=128,L=32768", b},
          {"B=8,H=32,Hkv=8,D=128,L=1000,lens=1000:0:1:77:999:500:16:17", b},
          {"B=4,H=32,Hkv=8,D=128,L=1024,Sq=4,lens=1024:3:0:600", b},
          {"B=8,H=32,Hkv=8,D=128,L=2048,paged=1,block=16,lens=2048:1:0:100:1500:2047:33:64", b},
          {"B=4,H=32,Hkv=8,D=128,L=2000,paged=1,block=64,Sq=4", b},
          {"B=2,H=32,Hkv=8,D=128,L=1,Sq=4", b},
          {"B=3,H=14,Hkv=2,D=64,L=777,Sq=3,lens=777:0:5", DType::f16},
          {"B=2,H=8,Hkv=1,D=64,L=300,paged=1,block=32,pages=40", DType::f16}};
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_" + dtype_name(i.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class GpuDecodeAttention : public testing::TestWithParam<Case> {
protected:
  const Operator& op() const { return find_operator("decode_attention"); }
  Problem problem() const {
    return op().parse(parse_kv(GetParam().shape, "--shape"), GetParam().dtype);
  }
};

TEST_P(GpuDecodeAttention, KernelMatchesFp64Reference) {
  CheckOptions o;
  o.seed = 11;
  CheckResult r = check_cuda(op(), problem(), o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_EQ(r.blocks_run, r.blocks_total) << "the fp64 reference covers every block here";
  EXPECT_EQ(r.nonfinite, 0);
}

TEST_P(GpuDecodeAttention, FrameworkMatchesFp64Reference) {
  const Problem p = problem();
  std::vector<HostTensor> args = op().make_args(p, 12);
  rt::ensure_context();
  DeviceArgs d = DeviceArgs::upload(args); // outputs upload as NaN
  std::unique_ptr<Framework> fw = op().framework(p, {});
  EXPECT_EQ(fw->name(), op().framework_name());
  fw->run(d.tensors, nullptr);
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  d.download(args, op().outputs(p));
  // The chain rounds P into the dtype as torch does: within the operator's own tolerance of
  // the fp64 result, not bit for bit.
  auto [atol, rtol] = default_tolerance(op(), p);
  const int t = op().outputs(p)[0];
  const std::vector<int64_t>& shape = args[t].shape();
  int64_t bad = 0, first = -1;
  for (int64_t b = 0; b < shape[0]; ++b) {
    Box box{t, {b, 0, 0, 0}, {1, shape[1], shape[2], shape[3]}};
    std::vector<double> want = op().reference(p, args, box);
    const int64_t base = b * shape[1] * shape[2] * shape[3];
    for (size_t i = 0; i < want.size(); ++i) {
      double got = args[t].get(base + static_cast<int64_t>(i));
      if (!(std::fabs(got - want[i]) <= atol + rtol * std::fabs(want[i])) && bad++ == 0)
        first = base + static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(bad, 0) << bad << " elements off, the first at flat index " << first;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuDecodeAttention, testing::ValuesIn(cases()), case_name);

} // namespace
