// Resource usage parsed from ptxas -v output: canned logs in the formats ptxas prints, and a
// real compile that must spill under a tight register limit.
#include <gtest/gtest.h>

#include "RuntimeTestUtil.h"
#include "runtime/Nvrtc.h"
#include "runtime/ResourceUsage.h"

using namespace tp::rt;

namespace {

// Shape of NVRTC 13 / ptxas output for two entries, the first spilling.
const char* two_entry_log =
    R"(ptxas info    : Overriding maximum register limit 256 for 'b' with  32 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'b' for 'sm_90a'
ptxas info    : Function properties for b
ptxas         .     320 bytes stack frame, 60 bytes spill stores, 72 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 320 bytes cumulative stack size
ptxas info    : Compile time = 51.109 ms
ptxas info    : Compiling entry function 'a' for 'sm_90a'
ptxas info    : Function properties for a
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Compile time = 3.171 ms
)";

} // namespace

TEST(ResourceUsage, ParsesEveryEntryInOrder) {
  auto all = parse_resource_usage(two_entry_log);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, "b");
  const ResourceUsage& b = all[0].second;
  EXPECT_EQ(b.registers, 32);
  EXPECT_EQ(b.stack_bytes, 320);
  EXPECT_EQ(b.spill_store_bytes, 60);
  EXPECT_EQ(b.spill_load_bytes, 72);
  EXPECT_EQ(b.shared_static_bytes, 0);
  EXPECT_NE(b.raw.find("Used 32 registers"), std::string::npos);
  EXPECT_EQ(b.raw.find("Compile time"), std::string::npos);
  const ResourceUsage& a = all[1].second;
  EXPECT_EQ(a.registers, 10);
  EXPECT_EQ(a.barriers, 1);
  EXPECT_EQ(a.shared_static_bytes, 4096);
  EXPECT_EQ(a.spill_store_bytes, 0);
}

TEST(ResourceUsage, SelectsByEntryName) {
  EXPECT_EQ(resource_usage(two_entry_log, "a").registers, 10);
  EXPECT_EQ(resource_usage(two_entry_log).registers, 32); // first entry
  EXPECT_EQ(resource_usage(two_entry_log, "missing").registers, -1);
  EXPECT_EQ(resource_usage("").registers, -1);
}

// Fields in one line, in another order, as older ptxas versions print them.
TEST(ResourceUsage, FieldOrderDoesNotMatter) {
  const char* log = "ptxas info    : Compiling entry function '_Z4gemmPf' for 'sm_80'\n"
                    "ptxas info    : Used 168 registers, used 1 barriers, 8 bytes stack frame, "
                    "16 bytes spill stores, 24 bytes spill loads, 49152 bytes smem, 400 bytes "
                    "cmem[0]\n";
  ResourceUsage u = resource_usage(log, "_Z4gemmPf");
  EXPECT_EQ(u.registers, 168);
  EXPECT_EQ(u.barriers, 1);
  EXPECT_EQ(u.stack_bytes, 8);
  EXPECT_EQ(u.spill_store_bytes, 16);
  EXPECT_EQ(u.spill_load_bytes, 24);
  EXPECT_EQ(u.shared_static_bytes, 49152);
}

// A called (non-inlined) device function's properties are not the entry's own frame.
TEST(ResourceUsage, IgnoresPropertiesOfCalledFunctions) {
  const char* log = "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
                    "ptxas info    : Function properties for _Z6helperv\n"
                    "ptxas         .     64 bytes stack frame, 4 bytes spill stores, 4 bytes "
                    "spill loads\n"
                    "ptxas info    : Function properties for k\n"
                    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes "
                    "spill loads\n"
                    "ptxas info    : Used 20 registers, used 0 barriers\n";
  ResourceUsage u = resource_usage(log, "k");
  EXPECT_EQ(u.registers, 20);
  EXPECT_EQ(u.stack_bytes, 0);
  EXPECT_EQ(u.spill_store_bytes, 0);
}

TEST(ResourceUsage, RealCompileReportsRegistersSharedAndSpills) {
  std::string src = R"(
extern "C" __global__ void smem(float* x) {
  __shared__ float s[1024];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[1023 - threadIdx.x];
}
extern "C" __global__ void spills(float* x, int n) {
  float r[64];
  for (int i = 0; i < 64; ++i) r[i] = x[i * n];
  float acc = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < 64; ++i) acc += r[(i + j) & 63] * r[i];
  x[0] = acc;
}
)";
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CompileOutput out = nvrtc_compile(src, "usage", arch, {"-maxrregcount=32"});
    ResourceUsage s = resource_usage(out.log, "smem");
    EXPECT_GT(s.registers, 0) << arch << "\n" << out.log;
    EXPECT_EQ(s.shared_static_bytes, 4096) << out.log;
    EXPECT_GE(s.barriers, 1);
    ResourceUsage p = resource_usage(out.log, "spills");
    EXPECT_GT(p.registers, 0);
    EXPECT_LE(p.registers, 32);
    EXPECT_GT(p.spill_store_bytes + p.stack_bytes, 0) << out.log;
  }
}

// ptxas names the function whose wgmma it serialized before that function's own lines.
TEST(ResourceUsage, FlagsSerializedWgmma) {
  const char* log =
      "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to non wgmma instructions defining accumulator registers of a wgmma "
      "between start and end of the pipeline stage in the function 'g'\n"
      "ptxas info    : Compiling entry function 'f' for 'sm_90a'\n"
      "ptxas info    : Used 40 registers, used 1 barriers\n"
      "ptxas info    : Compiling entry function 'g' for 'sm_90a'\n"
      "ptxas info    : Used 168 registers, used 1 barriers\n";
  EXPECT_FALSE(resource_usage(log, "f").wgmma_serialized);
  ResourceUsage g = resource_usage(log, "g");
  EXPECT_TRUE(g.wgmma_serialized);
  EXPECT_NE(g.raw.find("C7515"), std::string::npos);
  const char* few_registers =
      "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to insufficient register resources for the function 'h'\n"
      "ptxas info    : Compiling entry function 'h' for 'sm_90a'\n"
      "ptxas info    : Used 128 registers, used 1 barriers\n";
  EXPECT_TRUE(resource_usage(few_registers, "h").wgmma_serialized);
}

TEST(ResourceUsage, CountsInjectedWgmmaFences) {
  const char* log =
      "ptxas info    : (C7519) warpgroup.arrive is injected in around line 2023 by compiler to "
      "allow use of registers in GMMA in function 'att'\n"
      "ptxas info    : (C7519) warpgroup.arrive is injected in around line 2049 by compiler to "
      "allow use of registers in GMMA in function 'att'\n"
      "ptxas info    : Compiling entry function 'att' for 'sm_90a'\n"
      "ptxas info    : Used 168 registers, used 1 barriers\n"
      "ptxas info    : Compiling entry function 'other' for 'sm_90a'\n"
      "ptxas info    : Used 40 registers, used 1 barriers\n";
  EXPECT_EQ(resource_usage(log, "att").wgmma_fences_injected, 2);
  EXPECT_EQ(resource_usage(log, "other").wgmma_fences_injected, 0);
  EXPECT_FALSE(resource_usage(log, "att").wgmma_serialized);
}
