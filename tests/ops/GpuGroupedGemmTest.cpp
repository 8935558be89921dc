// grouped_gemm on the GPU (label gpu, sm_90a or sm_80): the default kernel over the whole grid
// agrees with the fp64 reference (every block at the small shapes, sampled blocks at Mixtral
// and DeepSeek sizes), and so do the framework operator (cuBLASLt per expert) and its stand-in
// (the fp32 GPU reference per expert) and gpu_reference, at ragged routings with empty
// experts, one expert with every row, both layouts, bf16 and f16. Device offs that give no
// expert a row leave C as it was: blocks with no work store nothing. Outputs start poisoned
// (NaN), so an element left unwritten fails.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/Check.h"
#include "ops/CudaCheck.h"
#include "ops/grouped_gemm/GroupedGemm.h"
#include "runtime/Driver.h"
#include "tilepilot/tilepilot.h"

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
  const DType b = DType::bf16, h = DType::f16;
  return {{"E=4,R=106,N=45,K=133,counts=37:0:64:5", b}, // rows not 16-byte aligned
          {"E=4,R=106,N=64,K=136,counts=37:0:64:5,layout=nn", h},
          {"E=4,R=1000,N=512,K=256,counts=0:0:1000:0", b}, // one expert with every row
          {"E=8,R=4096,N=2048,K=1024", b},                 // Mixtral-like prefill, smaller N
          {"E=8,R=64,N=14336,K=4096", b},                  // Mixtral decode, 32 tokens top-2
          {"E=64,R=384,N=2816,K=2048", b},                 // DeepSeek-style decode
          {"E=64,R=8192,N=1408,K=2048,layout=nn", h}};     // DeepSeek-style prefill
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_" + dtype_name(i.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class GpuGroupedGemm : public testing::TestWithParam<Case> {
protected:
  const Operator& op() const { return find_operator("grouped_gemm"); }
  Problem problem() const {
    return op().parse(parse_kv(GetParam().shape, "--shape"), GetParam().dtype);
  }
};

TEST_P(GpuGroupedGemm, KernelMatchesFp64Reference) {
  CheckOptions o;
  o.seed = 11;
  CheckResult r = check_cuda(op(), problem(), o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_EQ(r.nonfinite, 0);
}

/// Rows of C off the fp64 reference: every expert's first and last row and every 61st row.
int64_t bad_rows(const Operator& op, const Problem& p, const std::vector<HostTensor>& a,
                 std::string* first) {
  const int64_t N = p.at("N");
  std::set<int64_t> rows;
  for (int64_t r = 0; r < p.at("R"); r += 61)
    rows.insert(r);
  int64_t begin = 0;
  for (int64_t e = 0; e < p.at("E"); ++e) {
    const int64_t end = static_cast<int64_t>(a[2].get(e));
    if (end > begin) rows.insert({begin, end - 1});
    begin = end;
  }
  auto [atol, rtol] = default_tolerance(op, p);
  int64_t bad = 0;
  for (int64_t r : rows) {
    const std::vector<double> want = op.reference(p, a, Box{3, {r, 0}, {1, N}});
    for (int64_t n = 0; n < N; ++n) {
      const double got = a[3].get(r * N + n);
      if (!(std::fabs(got - want[n]) <= atol + rtol * std::fabs(want[n])) && bad++ == 0)
        *first = "C[" + std::to_string(r) + ", " + std::to_string(n) +
                 "] = " + std::to_string(got) + ", expected " + std::to_string(want[n]);
    }
  }
  return bad;
}

TEST_P(GpuGroupedGemm, FrameworkAndStandInMatchFp64Reference) {
  const Problem p = problem();
  for (bool vendor : {true, false}) {
    std::vector<HostTensor> args = op().make_args(p, 12);
    rt::ensure_context();
    DeviceArgs d = DeviceArgs::upload(args); // outputs upload as NaN
    FrameworkOptions fo;
    fo.allow_vendor = vendor;
    std::unique_ptr<Framework> fw = op().framework(p, fo);
    EXPECT_EQ(fw->is_vendor(), vendor) << fw->name() << ": " << fw->note();
    fw->run(d.tensors, nullptr);
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    d.download(args, op().outputs(p));
    std::string first;
    EXPECT_EQ(bad_rows(op(), p, args, &first), 0) << fw->name() << ": " << first;
  }
}

TEST_P(GpuGroupedGemm, GpuReferenceMatchesFp64Reference) {
  const Problem p = problem();
  std::vector<HostTensor> args = op().make_args(p, 13);
  rt::ensure_context();
  DeviceArgs d = DeviceArgs::upload(args);
  HostTensor c32(DType::f32, args[3].shape());
  c32.poison();
  DeviceArgs out = DeviceArgs::upload({c32});
  ASSERT_TRUE(op().gpu_reference(p, d.tensors, out.tensors, nullptr));
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  std::vector<HostTensor> got = {c32};
  out.download(got, {0});
  args[3] = got[0];
  std::string first;
  EXPECT_EQ(bad_rows(op(), p, args, &first), 0) << first;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGroupedGemm, testing::ValuesIn(cases()), case_name);

// offs of all zeros on the device: every block is past the tile list and C keeps its poison.
TEST(GpuGroupedGemmEdges, AllZeroOffsetsStoreNothing) {
  const Operator& op = find_operator("grouped_gemm");
  Problem p = op.parse(parse_kv("E=8,R=512,N=256,K=128", "--shape"), DType::bf16);
  std::vector<HostTensor> a = op.make_args(p, 3);
  for (int64_t e = 0; e < 8; ++e)
    a[2].set(e, 0);
  CompiledKernel ck = compile(op.build(p, op.default_config(p, device_arch())));
  DeviceArray da = DeviceArray::from(a[0]), db = DeviceArray::from(a[1]);
  DeviceArray doffs = DeviceArray::from(a[2]), dc = DeviceArray::from(a[3]);
  ck.launch({da, db, doffs, dc});
  synchronize();
  HostTensor c = dc.to_host();
  for (int64_t i = 0; i < c.numel(); ++i)
    ASSERT_TRUE(std::isnan(c.get(i))) << "C flat " << i << " was written";
}

} // namespace
