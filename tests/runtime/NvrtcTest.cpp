// NVRTC through the runtime: compiles for sm_80 and sm_90a without a GPU, embeds the device
// library, and reports failures with the program name, the arch and the log.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <gtest/gtest.h>
#include <set>

#include "RuntimeTestUtil.h"
#include "runtime/DeviceHeaders.h"
#include "runtime/DynamicLibrary.h"
#include "runtime/Nvrtc.h"
#include "runtime/ResourceUsage.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::rt;

TEST(Nvrtc, IsAvailableWithAVersion) {
  std::string why;
  ASSERT_TRUE(nvrtc_available(&why)) << why;
  std::string v = nvrtc_version();
  EXPECT_NE(v.find('.'), std::string::npos) << v;
  EXPECT_NE(nvrtc_library_path().find("libnvrtc"), std::string::npos);
}

// The same program compiled twice in a row still carries ptxas' report the second time:
// NVRTC's own on-disk cache (12.9+) is off, so every compile runs ptxas. With it on, the second
// compile on the H200 returned a cubin in ~30 ms with no report (runs s8, s10).
TEST(Nvrtc, EveryCompileRunsPtxasAndReportsResources) {
  ASSERT_TRUE(nvrtc_available());
  ASSERT_NE(std::getenv("CUDA_CACHE_DISABLE"), nullptr);
  for (int i = 0; i < 2; ++i) {
    CompileOutput out = nvrtc_compile(test::scale_kernel(), "scale_twice", "sm_90a", {});
    EXPECT_GT(resource_usage(out.log, "scale").registers, 0) << "compile " << i << ": " << out.log;
  }
}

TEST(Nvrtc, CompilesForSm90aWithArchSpecificTarget) {
  CompileOutput out = nvrtc_compile(test::scale_kernel(), "scale", "sm_90a", {});
  EXPECT_NE(out.ptx.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(out.ptx.find(".entry scale"), std::string::npos);
  ASSERT_GE(out.cubin.size(), 4u);
  EXPECT_EQ(std::string(out.cubin.data() + 1, 3), "ELF"); // a cubin is an ELF image
  EXPECT_GT(out.seconds, 0);
  EXPECT_GT(resource_usage(out.log, "scale").registers, 0) << out.log;
}

TEST(Nvrtc, CompilesForSm80) {
  CompileOutput out = nvrtc_compile(test::scale_kernel(), "scale", "sm_80", {});
  EXPECT_NE(out.ptx.find(".target sm_80"), std::string::npos);
  EXPECT_FALSE(out.cubin.empty());
  EXPECT_GT(resource_usage(out.log).registers, 0) << out.log;
}

TEST(Nvrtc, VirtualArchGivesPtxOnly) {
  CompileOutput out = nvrtc_compile(test::scale_kernel(), "scale", "compute_90a", {});
  EXPECT_NE(out.ptx.find(".target sm_90a"), std::string::npos);
  EXPECT_TRUE(out.cubin.empty());
}

TEST(Nvrtc, EffectiveOptionsAddDefaultsOnlyWhenUnset) {
  auto o = nvrtc_effective_options("sm_90a", {"-lineinfo"});
  EXPECT_EQ(o.front(), "-arch=sm_90a");
  EXPECT_NE(std::find(o.begin(), o.end(), "-std=c++17"), o.end());
  EXPECT_NE(std::find(o.begin(), o.end(), "-default-device"), o.end());
  EXPECT_NE(std::find(o.begin(), o.end(), "-Xptxas=-v"), o.end());
  auto p = nvrtc_effective_options("sm_80", {"-std=c++20", "--ptxas-options=-v"});
  EXPECT_EQ(std::find(p.begin(), p.end(), "-std=c++17"), p.end());
  EXPECT_EQ(std::find(p.begin(), p.end(), "-Xptxas=-v"), p.end());
}

TEST(Nvrtc, MinimalPreludeIsDefaultWhereSupportedAndNeverTwice) {
  int major = 0, minor = 0;
  std::sscanf(nvrtc_version().c_str(), "%d.%d", &major, &minor);
  const bool supported = major > 12 || (major == 12 && minor >= 4);
  auto o = nvrtc_effective_options("sm_90a", {});
  EXPECT_EQ(std::count(o.begin(), o.end(), "-minimal"), supported ? 1 : 0) << nvrtc_version();
  auto given = nvrtc_effective_options("sm_90a", {"--minimal"});
  EXPECT_EQ(std::count(given.begin(), given.end(), "-minimal"), 0);
  EXPECT_EQ(std::count(given.begin(), given.end(), "--minimal"), 1);
  // The option is part of the effective options, hence of every kernel cache key, and the
  // compile with it still runs ptxas (resource report present).
  CompileOutput out = nvrtc_compile(test::scale_kernel(), "scale", "sm_90a", {});
  EXPECT_GT(resource_usage(out.log).registers, 0) << out.log;
}

TEST(Nvrtc, BothPtxasVerboseSpellingsReportResources) {
  for (const char* opt : {"-Xptxas=-v", "--ptxas-options=-v"}) {
    CompileOutput out = nvrtc_compile(test::scale_kernel(), "scale", "sm_90a", {opt});
    EXPECT_GT(resource_usage(out.log).registers, 0) << opt << "\n" << out.log;
  }
}

TEST(Nvrtc, DeviceHeadersAreEmbeddedAndIncludable) {
  const auto& headers = device_headers();
  ASSERT_FALSE(headers.empty());
  bool umbrella = false;
  for (const auto& [name, text] : headers) {
    umbrella |= name == "tilepilot_device.cuh";
    EXPECT_FALSE(text.empty()) << name;
    EXPECT_EQ(name.find('\\'), std::string::npos) << name;
  }
  EXPECT_TRUE(umbrella);
  EXPECT_EQ(device_library_version().size(), 32u);
  std::string src = "#include \"tilepilot_device.cuh\"\n" + test::scale_kernel();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CompileOutput out = nvrtc_compile(src, "with_device_lib", arch, {});
    EXPECT_FALSE(out.cubin.empty()) << arch;
  }
}

// NVRTC resolves in-memory headers by exact name, so every quoted include inside device/ must
// name another embedded header by its path relative to device/.
TEST(Nvrtc, DeviceHeaderIncludesNameEmbeddedHeaders) {
  std::set<std::string> names;
  for (const auto& [name, text] : device_headers())
    names.insert(name);
  for (const auto& [name, text] : device_headers()) {
    size_t p = 0;
    while ((p = text.find("#include \"", p)) != std::string::npos) {
      p += 10;
      std::string inc = text.substr(p, text.find('"', p) - p);
      EXPECT_TRUE(names.count(inc))
          << name << " includes \"" << inc << "\", which is not an embedded header name";
    }
  }
}

TEST(Nvrtc, CompileErrorNamesProgramArchAndLog) {
  std::string src = "extern \"C\" __global__ void broken(float* x) { x[0] = undefined_thing; }\n";
  try {
    nvrtc_compile(src, "my_broken_kernel", "sm_90a", {});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("my_broken_kernel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sm_90a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("undefined_thing"), std::string::npos) << msg; // from the NVRTC log
    EXPECT_NE(msg.find("--stage cuda"), std::string::npos) << msg;
  }
}

TEST(Nvrtc, LongLogsAreCutInTheMessage) {
  std::string src;
  for (int i = 0; i < 100; ++i)
    src += "int bad" + std::to_string(i) + " = nope" + std::to_string(i) + ";\n";
  try {
    nvrtc_compile(src, "many_errors", "sm_80", {});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("more lines)"), std::string::npos) << e.what();
  }
}

TEST(Nvrtc, MissingLibraryMessageListsWhatWasTried) {
  std::string why;
  auto lib = open_library({"libnvrtc-does-not-exist.so.99", "/nonexistent/libnvrtc.so"}, &why);
  EXPECT_FALSE(lib);
  EXPECT_NE(why.find("libnvrtc-does-not-exist.so.99"), std::string::npos) << why;
  EXPECT_NE(why.find("/nonexistent/libnvrtc.so"), std::string::npos) << why;
}

TEST(Nvrtc, CandidatesHonourCudaHome) {
  test::ScopedEnv home("CUDA_HOME", "/opt/my-cuda");
  auto c = cuda_library_candidates({"libnvrtc.so.13"});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], "/opt/my-cuda/lib64/libnvrtc.so.13");
  EXPECT_EQ(c[1], "libnvrtc.so.13");
  EXPECT_EQ(c[2], "/usr/local/cuda/lib64/libnvrtc.so.13");
}

// Not a pass/fail property: records the cold compile time of a trivial kernel in the test log.
TEST(Nvrtc, TrivialKernelCompileTime) {
  nvrtc_compile(test::scale_kernel(), "warmup", "sm_90a", {}); // loads NVRTC and builtins
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (bool with_lib : {false, true}) {
      std::string src =
          (with_lib ? "#include \"tilepilot_device.cuh\"\n" : "") + test::scale_kernel();
      double best = 1e9;
      for (int i = 0; i < 3; ++i)
        best = std::min(best, nvrtc_compile(src, "t", arch, {}).seconds);
      std::printf("[ timing ] trivial kernel %s%s: %.1f ms\n", arch,
                  with_lib ? " + tilepilot_device.cuh" : "", best * 1e3);
      EXPECT_LT(best, 10.0);
    }
  }
}
