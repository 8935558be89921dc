// decode_attention's split-KV kernels through the CUDA backend without a GPU: at Llama-3-8B
// decode shapes (B=1, contiguous 8k and 128k caches, paged with 16- and 64-key pages, four
// query tokens) and an odd one with choose_splits' count for an H200's 132 SMs, the split and
// combine kernels lower for sm_90a, both of the split kernel's gemms lower to wgmma (a simt or
// mma.sync gemm there is the slow path), and both kernels compile through NVRTC without spilling.
#include <gtest/gtest.h>

#include <sstream>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/decode_attention/DecodeAttention.h"
#include "ops/decode_attention/SplitKv.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;
namespace da = tp::ops::decode_attention;

namespace {

constexpr int kH200Sms = 132;

std::map<std::string, std::string> kv_of(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    kv[item.substr(0, item.find('='))] = item.substr(item.find('=') + 1);
  return kv;
}

std::vector<std::string> shapes() {
  return {"B=1,H=32,Hkv=8,D=128,L=8192", "B=1,H=32,Hkv=8,D=128,L=131072",
          "B=1,H=32,Hkv=8,D=128,L=8192,paged=1,block=16",
          "B=1,H=32,Hkv=8,D=128,L=8192,paged=1,block=64",
          "B=2,H=32,Hkv=8,D=128,L=8192,Sq=4,lens=8192:77",
          // Odd: seven heads of three tokens per KV head, D=64, pages of 32 keys.
          "B=3,H=14,Hkv=2,D=64,L=1001,Sq=3,paged=1,block=32"};
}

std::string name_of(const testing::TestParamInfo<std::string>& i) {
  std::string n = i.param;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

struct Built {
  Problem p;
  Config c;
};

Built llama(const std::string& shape) {
  Problem p = da::parse(kv_of(shape), DType::bf16);
  Config c = da::default_config(p, "sm_90a");
  c["splits"] = da::choose_splits(p, c, kH200Sms);
  return {p, c};
}

/// The "// gemm at FILE:LINE: ENGINE" lines of the lowered IR.
std::vector<std::string> gemm_lines(const std::string& lowered) {
  std::vector<std::string> out;
  std::stringstream ss(lowered);
  for (std::string line; std::getline(ss, line);)
    if (line.rfind("// gemm at ", 0) == 0) out.push_back(line);
  return out;
}

void expect_compiles_without_spilling(const Kernel& k) {
  cuda::LoweredKernel lk = cuda::lower_kernel(k, passes::Target::parse("sm_90a"));
  // Bypass the kernel cache: the test reads ptxas' report of this compile.
  rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, "sm_90a", {}, true);
  EXPECT_FALSE(j.compiled.cubin.empty()) << k->name;
  rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
  EXPECT_GT(u.registers, 0) << j.compiled.log;
  EXPECT_EQ(u.spill_store_bytes, 0) << k->name << ": " << u.raw;
  EXPECT_EQ(u.spill_load_bytes, 0) << k->name << ": " << u.raw;
}

class DecodeAttentionSplitKvSm90 : public testing::TestWithParam<std::string> {};

TEST_P(DecodeAttentionSplitKvSm90, SplitsTheKeysOverTheSms) {
  Built b = llama(GetParam());
  EXPECT_GT(b.c.at("splits"), 1) << "these grids leave most of 132 SMs idle unsplit";
  EXPECT_EQ(b.c.at("bm"), 64);
  EXPECT_EQ(b.c.at("threads"), 128);
}

TEST_P(DecodeAttentionSplitKvSm90, BothGemmsOfTheSplitKernelLowerToWgmma) {
  Built b = llama(GetParam());
  std::string lowered = compile(da::build_split(b.p, b.c), {.arch = "sm_90a"}).lowered();
  std::vector<std::string> gemms = gemm_lines(lowered);
  ASSERT_EQ(gemms.size(), 2u) << lowered.substr(0, 2000);
  EXPECT_NE(gemms[0].find(": wgmma_ss"), std::string::npos) << gemms[0] << " (q k^T)";
  EXPECT_NE(gemms[1].find(": wgmma_rs"), std::string::npos) << gemms[1] << " (p v)";
}

TEST_P(DecodeAttentionSplitKvSm90, SplitAndCombineCompileThroughNvrtcWithoutSpilling) {
  Built b = llama(GetParam());
  expect_compiles_without_spilling(da::build_split(b.p, b.c));
  expect_compiles_without_spilling(da::build_combine(b.p, b.c));
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionSplitKvSm90, testing::ValuesIn(shapes()), name_of);

TEST(DecodeAttentionSplitKvLowering, TheSplitKernelKeepsTheSingleKernelsPipeline) {
  // The split kernel differs from the single one in its loop's bounds and its stores only: its
  // loop must take the same copy engine and stages as the single kernel's.
  Built b = llama("B=1,H=32,Hkv=8,D=128,L=8192");
  auto plan = [](const std::string& lowered) {
    std::stringstream ss(lowered);
    std::string out;
    for (std::string line; std::getline(ss, line);)
      if (line.rfind("// pipeline", 0) == 0 || line.rfind("// pipelined loop", 0) == 0)
        out += line + "\n";
    return out;
  };
  std::string single = compile(da::build(b.p, b.c), {.arch = "sm_90a"}).lowered();
  std::string split = compile(da::build_split(b.p, b.c), {.arch = "sm_90a"}).lowered();
  EXPECT_FALSE(plan(single).empty()) << single.substr(0, 2000);
  EXPECT_EQ(plan(split), plan(single));
}

} // namespace
