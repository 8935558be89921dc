// gemm's split-K kernels through the CUDA backend without a GPU: at the decode shapes the
// sm_90a default splits (M = 1, 7, 16 with N = 4096 and 6144, K = 4096, and N = 1024, which
// takes 32-wide tiles) in each layout, the split kernel lowers to wgmma and keeps the single
// kernel's pipeline (copy engine, stages); the split kernel at tiles of 32, 64 and 128 columns
// in each layout compiles through NVRTC for sm_90a (with and without TMA) and sm_80 without
// spilling, and so does the combine for bf16, f16 and f32.
#include <gtest/gtest.h>

#include <sstream>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/Operator.h"
#include "ops/gemm/GemmOp.h"
#include "ops/gemm/GemmSplitK.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;

namespace {

const Operator& op() {
  return find_operator("gemm");
}

/// The decode shapes the sm_90a default splits, each layout.
std::vector<std::string> default_shapes() {
  std::vector<std::string> out;
  for (const char* layout : {"nt", "nn", "tn"})
    for (const char* mnk :
         {"M=17,N=4096,K=4096", "M=48,N=2048,K=4096", "M=64,N=4096,K=4096", "M=20,N=1024,K=4096"})
      out.push_back(std::string(mnk) + ",layout=" + layout);
  return out;
}

std::string name_of(const testing::TestParamInfo<std::string>& i) {
  std::string n = i.param;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

Problem problem(const std::string& shape, DType dt = DType::bf16) {
  return op().parse(parse_kv(shape, "--shape"), dt);
}

void expect_compiles_without_spilling(const Kernel& k, const passes::Target& t) {
  SCOPED_TRACE(k->name + " " + t.str());
  cuda::LoweredKernel lk = cuda::lower_kernel(k, t);
  // Bypass the kernel cache: the test reads ptxas' report of this compile.
  rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, t.arch, {}, true);
  EXPECT_FALSE(j.compiled.cubin.empty());
  rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
  EXPECT_GT(u.registers, 0) << j.compiled.log;
  EXPECT_EQ(u.spill_store_bytes, 0) << u.raw;
  EXPECT_EQ(u.spill_load_bytes, 0) << u.raw;
}

/// The lowered IR's lines that start with `prefix`.
std::string lines_with(const std::string& lowered, const std::string& prefix) {
  std::stringstream ss(lowered);
  std::string out;
  for (std::string line; std::getline(ss, line);)
    if (line.rfind(prefix, 0) == 0) out += line + "\n";
  return out;
}

passes::Target target(const std::string& arch, bool tma = true) {
  passes::Target t = passes::Target::parse(arch);
  t.allow_tma = tma;
  return t;
}

class GemmSplitKSm90 : public testing::TestWithParam<std::string> {};

TEST_P(GemmSplitKSm90, TheSplitKernelsGemmIsWgmmaInTheSingleKernelsPipeline) {
  Problem p = problem(GetParam());
  Config c = splitk::split_config(splitk::choose_split(p, 132));
  EXPECT_GT(splitk::splits_of(c), 1) << "these grids leave most of 132 SMs idle unsplit";
  KernelProgram prog = checked_program(op(), p, c);
  ASSERT_EQ(prog.steps.size(), 2u);
  std::string split = compile(prog.steps[0].kernel, {.arch = "sm_90a"}).lowered();
  std::string gemms = lines_with(split, "// gemm at ");
  EXPECT_NE(gemms.find(": wgmma"), std::string::npos) << gemms << split.substr(0, 2000);
  // The split kernel differs from the single one in its loop's bounds and its store only.
  Config one = c;
  one.erase("splits");
  std::string single =
      compile(gemm_kernel(p.dtype, p.options.at("layout"), one), {.arch = "sm_90a"}).lowered();
  EXPECT_FALSE(lines_with(single, "// pipeline").empty()) << single.substr(0, 2000);
  EXPECT_EQ(lines_with(split, "// pipeline"), lines_with(single, "// pipeline"));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmSplitKSm90, testing::ValuesIn(default_shapes()), name_of);

TEST(GemmSplitKNvrtc, SplitKernelsOfEveryDefaultTileCompileWithoutSpilling) {
  // The widths the default takes (32, 64, 128) in each layout, with and without TMA on sm_90a
  // (the default's pipeline) and on sm_80 (a cp.async one).
  for (const char* layout : {"nt", "nn", "tn"})
    for (int64_t bn : {32, 64, 128}) {
      Problem p = problem(std::string("M=7,N=4096,K=1000,layout=") + layout);
      Config c = {{"bm", 64},    {"bn", bn},       {"bk", 64},
                  {"stages", 8}, {"threads", 128}, {"splits", 3}};
      Kernel k = checked_program(op(), p, c).steps.at(0).kernel;
      expect_compiles_without_spilling(k, target("sm_90a"));
      expect_compiles_without_spilling(k, target("sm_90a", false));
      c["bk"] = 32;
      c["stages"] = 3;
      check_config(op(), p, c, "sm_80");
      expect_compiles_without_spilling(checked_program(op(), p, c).steps.at(0).kernel,
                                       target("sm_80"));
    }
}

TEST(GemmSplitKNvrtc, CombineCompilesWithoutSpillingForEachDtype) {
  for (DType dt : {DType::bf16, DType::f16, DType::f32})
    for (int64_t s : {int64_t{2}, splitk::kMaxSplits}) {
      Kernel k = splitk::build_combine(dt, {{"splits", s}});
      expect_compiles_without_spilling(k, target("sm_90a"));
      expect_compiles_without_spilling(k, target("sm_80"));
    }
}

} // namespace
