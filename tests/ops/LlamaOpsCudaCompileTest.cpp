// rmsnorm, swiglu and rope through the CUDA backend without a GPU: each operator's default
// sm_90a and sm_80 kernels, at Llama-3 shapes and odd ones, lower and compile through NVRTC
// without spilling; the torch-eager framework chains' CUDA sources compile for every dtype.
#include <gtest/gtest.h>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/rmsnorm/RmsNorm.h"
#include "ops/rmsnorm/RmsNormFramework.h"
#include "ops/rope/Rope.h"
#include "ops/rope/RopeFramework.h"
#include "ops/swiglu/SwiGlu.h"
#include "ops/swiglu/SwiGluFramework.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Shipped {
  std::string op, shape, arch;
};

std::map<std::string, std::string> kv_of(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    kv[item.substr(0, item.find('='))] = item.substr(item.find('=') + 1);
  return kv;
}

Kernel default_kernel(const Shipped& s) {
  std::map<std::string, std::string> kv = kv_of(s.shape);
  if (s.op == "rmsnorm") {
    Problem p = rmsnorm::parse(kv, DType::bf16);
    return rmsnorm::build(p, rmsnorm::default_config(p, s.arch));
  }
  if (s.op == "swiglu") {
    Problem p = swiglu::parse(kv, DType::bf16);
    return swiglu::build(p, swiglu::default_config(p, s.arch));
  }
  Problem p = rope::parse(kv, DType::bf16);
  return rope::build(p, rope::default_config(p, s.arch));
}

std::vector<Shipped> shipped() {
  std::vector<Shipped> out;
  for (std::string arch : {"sm_90a", "sm_80"}) {
    for (std::string s : {"T=4096,H=4096,residual=1", "T=1,H=4096", "T=16,H=8192,residual=1",
                          "T=7,H=1000,residual=1"})
      out.push_back({"rmsnorm", s, arch});
    for (std::string s : {"T=4096,I=14336", "T=1,I=14336", "T=33,I=1000"})
      out.push_back({"swiglu", s, arch});
    for (std::string s : {"T=4096,H=32,Hkv=8,D=128", "T=1,H=32,Hkv=8,D=128,start=131071",
                          "T=33,H=5,Hkv=1,D=64", "T=4,H=32,Hkv=32,D=128,scaling=none"})
      out.push_back({"rope", s, arch});
  }
  return out;
}

std::string name_of(const testing::TestParamInfo<Shipped>& i) {
  std::string n = i.param.op + "_" + i.param.arch + "_" + i.param.shape;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class LlamaOpsShipped : public testing::TestWithParam<Shipped> {};

TEST_P(LlamaOpsShipped, CompilesThroughNvrtcWithoutSpilling) {
  const Shipped& s = GetParam();
  cuda::LoweredKernel lk = cuda::lower_kernel(default_kernel(s), passes::Target::parse(s.arch));
  // Bypass the kernel cache: the test reads ptxas' report of this compile.
  rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, s.arch, {}, true);
  EXPECT_FALSE(j.compiled.cubin.empty());
  rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
  EXPECT_GT(u.registers, 0) << j.compiled.log;
  EXPECT_EQ(u.spill_store_bytes, 0) << u.raw;
  EXPECT_EQ(u.spill_load_bytes, 0) << u.raw;
}

INSTANTIATE_TEST_SUITE_P(Defaults, LlamaOpsShipped, testing::ValuesIn(shipped()), name_of);

TEST(LlamaOpsFramework, EagerChainsCompileForEveryDtype) {
  for (std::string arch : {"sm_90a", "sm_80"}) {
    std::vector<std::string> r = rmsnorm::compile_framework(arch);
    std::vector<std::string> s = swiglu::compile_framework(arch);
    std::vector<std::string> q = rope::compile_framework(arch);
    EXPECT_EQ(r.size(), 12u); // 4 kernels x bf16, f16, f32
    EXPECT_EQ(s.size(), 6u);  // 2 kernels x bf16, f16, f32
    EXPECT_EQ(q.size(), 8u);  // 4 kernels x bf16, f16
    EXPECT_NE(std::find(r.begin(), r.end(), "eager_sqmean f32"), r.end());
    EXPECT_NE(std::find(q.begin(), q.end(), "eager_cos_sin f16"), q.end());
  }
}

} // namespace
