// decode_attention through the CUDA backend without a GPU: the default sm_90a and sm_80 kernels
// at Llama-3-8B decode shapes (contiguous, per-sequence lengths, paged with 16- and 64-key
// pages, four query tokens) and odd ones lower and compile through NVRTC without spilling; the
// torch-eager framework chain's CUDA source compiles for every dtype.
#include <gtest/gtest.h>

#include <sstream>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/decode_attention/DecodeAttention.h"
#include "ops/decode_attention/DecodeAttentionFramework.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Shipped {
  std::string shape, arch;
};

std::map<std::string, std::string> kv_of(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    kv[item.substr(0, item.find('='))] = item.substr(item.find('=') + 1);
  return kv;
}

std::vector<Shipped> shipped() {
  std::vector<Shipped> out;
  for (std::string arch : {"sm_90a", "sm_80"})
    for (std::string s : {"B=8,H=32,Hkv=8,D=128,L=8192", "B=1,H=32,Hkv=8,D=128,L=131072",
                          "B=4,H=32,Hkv=8,D=128,L=4096,lens=1:0:4096:77",
                          "B=16,H=32,Hkv=8,D=128,L=4096,paged=1,block=16",
                          "B=16,H=32,Hkv=8,D=128,L=4096,paged=1,block=64",
                          "B=8,H=32,Hkv=8,D=128,L=2048,Sq=4", "B=3,H=14,Hkv=2,D=64,L=77,Sq=3"})
      out.push_back({s, arch});
  return out;
}

std::string name_of(const testing::TestParamInfo<Shipped>& i) {
  std::string n = i.param.arch + "_" + i.param.shape;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class DecodeAttentionShipped : public testing::TestWithParam<Shipped> {};

TEST_P(DecodeAttentionShipped, CompilesThroughNvrtcWithoutSpilling) {
  const Shipped& s = GetParam();
  Problem p = decode_attention::parse(kv_of(s.shape), DType::bf16);
  Kernel k = decode_attention::build(p, decode_attention::default_config(p, s.arch));
  cuda::LoweredKernel lk = cuda::lower_kernel(k, passes::Target::parse(s.arch));
  // Bypass the kernel cache: the test reads ptxas' report of this compile.
  rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, s.arch, {}, true);
  EXPECT_FALSE(j.compiled.cubin.empty());
  rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
  EXPECT_GT(u.registers, 0) << j.compiled.log;
  EXPECT_EQ(u.spill_store_bytes, 0) << u.raw;
  EXPECT_EQ(u.spill_load_bytes, 0) << u.raw;
}

INSTANTIATE_TEST_SUITE_P(Defaults, DecodeAttentionShipped, testing::ValuesIn(shipped()), name_of);

TEST(DecodeAttentionFramework, EagerChainCompilesForEveryDtype) {
  for (std::string arch : {"sm_90a", "sm_80"}) {
    std::vector<std::string> r = decode_attention::compile_framework(arch);
    EXPECT_EQ(r.size(), 8u); // 4 kernels x bf16, f16
    EXPECT_NE(std::find(r.begin(), r.end(), "da_gather f16"), r.end());
    EXPECT_NE(std::find(r.begin(), r.end(), "da_softmax bf16"), r.end());
  }
}

} // namespace
