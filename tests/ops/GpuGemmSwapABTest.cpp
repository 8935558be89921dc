// gemm's swapped decode form (swap_ab=1) on the GPU (label gpu, sm_90a): decode shapes (M = 1,
// 4, 16 with N = K = 4096) in each layout, one and two consumer warpgroups, deep and shallow
// pipelines, and odd shapes (N = 130, K = 333, M = 19: a ragged second block row; K = 1001,
// whose nn rows are not 16-byte aligned: the non-TMA variant; f16 and f32) agree with the fp64
// reference on every element, through the operator's program path (C starts poisoned, so an
// element left unwritten fails).
#include <gtest/gtest.h>

#include "ops/Check.h"
#include "ops/CudaCheck.h"
#include "ops/gemm/GemmOp.h"

using namespace tp;
using namespace tp::ops;

namespace {

const Operator& op() {
  return find_operator("gemm");
}

struct Case {
  std::string shape;
  Config config;
  DType dtype = DType::bf16;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape << " " << config_str(c.config) << " " << dtype_name(c.dtype);
}

Config swapped(int64_t bm, int64_t bn, int64_t bk, int64_t stages, int64_t threads = 128) {
  return {{"swap_ab", 1},     {"bm", bm},           {"bn", bn},   {"bk", bk},
          {"stages", stages}, {"threads", threads}, {"splits", 1}};
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* layout : {"nn", "nt", "tn"}) {
    const std::string l = std::string(",layout=") + layout;
    for (const char* m : {"1", "4", "16"})
      out.push_back({std::string("M=") + m + ",N=4096,K=4096" + l, swapped(16, 64, 128, 8)});
    out.push_back({"M=4,N=4096,K=4096" + l, swapped(16, 128, 64, 6, 256)});
    out.push_back({"M=19,N=130,K=333" + l, swapped(16, 64, 64, 3)});
    out.push_back({"M=7,N=130,K=333" + l, swapped(32, 64, 64, 2), DType::f16});
  }
  out.push_back({"M=7,N=45,K=1001,layout=nn", swapped(16, 64, 64, 4)});
  out.push_back({"M=7,N=130,K=200,layout=nn", swapped(16, 64, 32, 3), DType::f32});
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_" + config_str(i.param.config) + dtype_name(i.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class GpuGemmSwapAB : public testing::TestWithParam<Case> {};

TEST_P(GpuGemmSwapAB, MatchesFp64ReferenceOnEveryElement) {
  const Case& k = GetParam();
  Problem p = op().parse(parse_kv(k.shape, "--shape"), k.dtype);
  CheckOptions o;
  o.seed = 23;
  o.config = fit_stages(op(), p, k.config, "sm_90a"); // f32 tiles are twice as large
  CheckResult r = check_cuda(op(), p, o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_EQ(r.nonfinite, 0);
  EXPECT_EQ(r.checked, p.at("M") * p.at("N")) << "every element against the fp64 reference";
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemmSwapAB, testing::ValuesIn(cases()), case_name);

} // namespace
