// gemm's split-K program on the GPU (label gpu, sm_90a): choose_split's config at the decode
// shapes (M = 1, 7, 16 with N = 4096 and K = 4096 in each layout, N = 6144, N = 1024 with
// 32-wide tiles), which splits, and forced split counts at odd shapes (N = 45 and 130, K = 133
// and 1000, more splits than K blocks, K = 1001 whose nn rows are not 16-byte aligned: the
// non-TMA variant, f16 and f32) agree with the fp64 reference on every element, through the
// operator's own program path (the runtime allocates P, poisoned; C starts poisoned, so an
// element left unwritten fails).
#include <gtest/gtest.h>

#include "ops/Check.h"
#include "ops/CudaCheck.h"
#include "ops/gemm/GemmOp.h"
#include "ops/gemm/GemmSplitK.h"

using namespace tp;
using namespace tp::ops;

namespace {

const Operator& op() {
  return find_operator("gemm");
}

struct Case {
  std::string shape;
  int64_t splits; // 0: choose_split's (which must split)
  DType dtype = DType::bf16;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape << " splits=" << c.splits << " " << dtype_name(c.dtype);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  // choose_split splits above 16 rows (M <= 16 runs unsplit); below, the forced splits.
  for (const char* layout : {"nt", "nn", "tn"})
    for (const char* m : {"17", "32", "64"})
      out.push_back({std::string("M=") + m + ",N=4096,K=4096,layout=" + layout, 0});
  out.push_back({"M=40,N=2048,K=4096,layout=nt", 0});
  out.push_back({"M=20,N=1024,K=4096,layout=nt", 0});
  out.push_back({"M=32,N=4096,K=4096,layout=nt", 0, DType::f16});
  for (const char* m : {"1", "7", "16"})
    out.push_back({std::string("M=") + m + ",N=4096,K=4096,layout=nt", 4});
  for (const char* layout : {"nt", "nn", "tn"})
    for (int64_t s : {2, 3, 5}) {
      out.push_back({std::string("M=7,N=130,K=1000,layout=") + layout, s});
      out.push_back({std::string("M=1,N=45,K=133,layout=") + layout, s}); // 3 K blocks of 64
    }
  out.push_back({"M=7,N=45,K=1001,layout=nn", 4}); // A's rows 2002 bytes: no TMA
  out.push_back({"M=1,N=130,K=40,layout=nt", splitk::kMaxSplits});
  out.push_back({"M=7,N=130,K=1000,layout=tn", 5, DType::f16});
  out.push_back({"M=7,N=130,K=1000,layout=nn", 3, DType::f32});
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_s" + std::to_string(i.param.splits) + dtype_name(i.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class GpuGemmSplitK : public testing::TestWithParam<Case> {};

TEST_P(GpuGemmSplitK, ProgramMatchesFp64ReferenceOnEveryElement) {
  const Case& k = GetParam();
  Problem p = op().parse(parse_kv(k.shape, "--shape"), k.dtype);
  CheckOptions o;
  o.seed = 17;
  o.config = splitk::split_config(splitk::choose_split(p, 132));
  if (k.splits) {
    o.config = {{"bm", 64}, {"bn", 64}, {"bk", 64}, {"stages", 8}, {"threads", 128}};
    o.config["splits"] = k.splits;
    o.config = fit_stages(op(), p, o.config, "sm_90a"); // f32: 8 stages of 64x64 do not fit
  }
  ASSERT_GT(splitk::splits_of(o.config), 1) << config_str(o.config);
  CheckResult r = check_cuda(op(), p, o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_EQ(r.nonfinite, 0);
  EXPECT_EQ(r.checked, p.at("M") * p.at("N")) << "every element against the fp64 reference";
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemmSplitK, testing::ValuesIn(cases()), case_name);

} // namespace
