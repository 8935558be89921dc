// CPU checks of the vendor loaders: cuBLASLt and cuDNN are found (the CUDA toolkit is installed
// where CI runs) and report their versions; TILEPILOT_CUDNN_PATH is honoured; without a driver
// the availability checks say why; bad arguments are rejected with messages that say what to do.
#include <gtest/gtest.h>

#include "ops/reference/AttentionDesc.h"
#include "ops/vendor/CublasLt.h"
#include "ops/vendor/CudnnAttention.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

using namespace tp;
using namespace tp::ops;

namespace {

/// Runs `f`, expects a UserError, and returns its message.
template <typename F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return "";
}

struct ScopedEnv {
  std::string name, old;
  bool had;
  ScopedEnv(const char* n, const char* v) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    old = o ? o : "";
    setenv(n, v, 1);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name.c_str(), old.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

} // namespace

TEST(VendorLibrary, CublasLtIsFoundAndReportsItsVersion) {
  std::string why;
  auto lib = cublaslt_library(&why);
  ASSERT_TRUE(lib) << why;
  EXPECT_NE(lib->path.find("libcublasLt.so"), std::string::npos) << lib->path;
  EXPECT_GE(lib->version, 120000u) << lib->describe();
  EXPECT_EQ(lib->describe().rfind("cuBLASLt 1", 0), 0u) << lib->describe();
}

TEST(VendorLibrary, CudnnIsFoundAndReportsItsVersion) {
  std::string why;
  auto lib = cudnn_library(&why);
  ASSERT_TRUE(lib) << why;
  EXPECT_NE(lib->path.find("libcudnn.so"), std::string::npos) << lib->path;
  EXPECT_GE(lib->version, 90000u) << lib->describe();
  EXPECT_EQ(lib->version_text().rfind("9.", 0), 0u) << lib->version_text();
}

TEST(VendorLibrary, CudnnPathOverrideIsHonoured) {
  auto lib = cudnn_library();
  ASSERT_TRUE(lib);
  {
    ScopedEnv env("TILEPILOT_CUDNN_PATH", lib->path.c_str());
    auto again = cudnn_library();
    ASSERT_TRUE(again);
    EXPECT_EQ(again->path, lib->path);
  }
  ScopedEnv env("TILEPILOT_CUDNN_PATH", "/nonexistent/libcudnn.so.9");
  std::string why;
  EXPECT_FALSE(cudnn_library(&why));
  EXPECT_NE(why.find("TILEPILOT_CUDNN_PATH=/nonexistent/libcudnn.so.9"), std::string::npos) << why;
}

TEST(VendorLibrary, VersionTextDecodesBothEncodings) {
  EXPECT_EQ((VendorLibrary{"cuDNN", "", 91400}.version_text()), "9.14.0");
  EXPECT_EQ((VendorLibrary{"cuDNN", "", 8907}.version_text()), "8.9.7");
  EXPECT_EQ((VendorLibrary{"cuBLASLt", "", 130100}.version_text()), "13.1.0");
}

TEST(VendorLibrary, WithoutADriverAvailabilitySaysWhy) {
  if (rt::driver_available()) GTEST_SKIP() << "a CUDA driver is present here";
  std::string why;
  EXPECT_FALSE(cublaslt_available(&why));
  EXPECT_NE(why.find("no usable GPU"), std::string::npos) << why;
  EXPECT_NE(why.find("driver"), std::string::npos) << why;
  why.clear();
  EXPECT_FALSE(cudnn_attention_available(&why));
  EXPECT_NE(why.find("no usable GPU"), std::string::npos) << why;
  std::string msg = user_error_of([] { CublasLtGemm g; });
  EXPECT_NE(msg.find("cuBLASLt gemm cannot run"), std::string::npos) << msg;
  msg = user_error_of([] { CudnnAttention a; });
  EXPECT_NE(msg.find("cuDNN attention cannot run"), std::string::npos) << msg;
}

TEST(VendorLibrary, CublasLtRejectsBadArguments) {
  std::string msg = user_error_of([] { validate_cublaslt_gemm(DType::bf16, "tt", 4, 4, 4); });
  EXPECT_NE(msg.find("layout 'tt'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("use nn, nt or tn"), std::string::npos) << msg;
  msg = user_error_of([] { validate_cublaslt_gemm(DType::f32, "nn", 4, 4, 4); });
  EXPECT_NE(msg.find("dtype f32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bf16 or f16"), std::string::npos) << msg;
  msg = user_error_of([] { validate_cublaslt_gemm(DType::bf16, "nn", 4, 0, 4); });
  EXPECT_NE(msg.find("N=0"), std::string::npos) << msg;
  validate_cublaslt_gemm(DType::f16, "tn", 1, 45, 133); // fine
}

TEST(VendorLibrary, AttentionDescriptionsAreValidated) {
  AttentionDesc d;
  d.B = 2, d.H = 8, d.Hkv = 3, d.S = 16, d.Skv = 16, d.D = 64;
  std::string msg = user_error_of([&] { validate_attention_desc(d, "cuDNN attention"); });
  EXPECT_NE(msg.find("cuDNN attention: Hkv=3 does not divide H=8"), std::string::npos) << msg;
  d.Hkv = 2;
  d.k_stride = {64, 16 * 64, 1, 16}; // d not contiguous
  msg = user_error_of([&] { validate_attention_desc(d, "x"); });
  EXPECT_NE(msg.find("K has d stride 16"), std::string::npos) << msg;
  d.k_stride = {};
  d.dtype = DType::f32;
  msg = user_error_of([&] { validate_attention_desc(d, "x"); });
  EXPECT_NE(msg.find("use bf16 or f16"), std::string::npos) << msg;
  d.dtype = DType::bf16;
  validate_attention_desc(d, "x");
  d.lse = true;
  msg = user_error_of([&] { validate_attention_ptrs(d, {1, 1, 1, 1, 0, 0}, "x"); });
  EXPECT_NE(msg.find("lse pointer is null"), std::string::npos) << msg;
}

TEST(VendorLibrary, AttentionDescriptionsResolveStridesAndPrint) {
  Problem p = find_operator("attention")
                  .parse({{"B", "2"},
                          {"H", "8"},
                          {"Hkv", "2"},
                          {"S", "77"},
                          {"Skv", "128"},
                          {"D", "64"},
                          {"causal", "1"},
                          {"lse", "1"},
                          {"lens", "5:128"}},
                         DType::bf16);
  AttentionDesc d = attention_desc(p);
  EXPECT_EQ(d.str(), "attention bf16 B=2 H=8 Hkv=2 S=77 Skv=128 D=64 causal lens lse");
  EXPECT_EQ(d.q_strides(), (std::array<int64_t, 4>{8 * 77 * 64, 77 * 64, 64, 1}));
  EXPECT_EQ(d.k_strides(), (std::array<int64_t, 4>{2 * 128 * 64, 128 * 64, 64, 1}));
  EXPECT_DOUBLE_EQ(d.effective_scale(), 0.125);
  AttentionDesc e = d;
  e.q_stride = {77 * 8 * 64, 64, 8 * 64, 1}; // [B, S, H, D] memory
  EXPECT_NE(d.key(), e.key());
  EXPECT_NE(e.str().find("strides q[39424, 64, 512, 1]"), std::string::npos) << e.str();
}
