// CPU checks of the cuDNN SDPA graph: every tensor and operation node finalizes with the cuDNN
// found here, for every feature combination we ask cuDNN for (plans need a GPU; nodes do not),
// and the version limits known without a GPU are reported in words.
#include <gtest/gtest.h>

#include "ops/reference/AttentionDesc.h"
#include "ops/vendor/CudnnAttention.h"
#include "ops/vendor/CudnnSdpaGraph.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::ops;

namespace {

AttentionDesc desc(int64_t B, int64_t H, int64_t Hkv, int64_t S, int64_t Skv, int64_t D,
                   bool causal = false, bool lens = false, bool lse = false) {
  AttentionDesc d;
  d.B = B, d.H = H, d.Hkv = Hkv, d.S = S, d.Skv = Skv, d.D = D;
  d.causal = causal, d.lens = lens, d.lse = lse;
  return d;
}

// bmm1, scale, softmax (max, sub, exp, sum, log, add, div), bmm2.
constexpr int kBaseOps = 10;
constexpr int kPaddingOps = 6; // gen row, gen col, lt, lt, and, select
constexpr int kCausalOps = 6;  // gen row, gen col, add, sub, ge, select

} // namespace

TEST(CudnnGraph, EveryFeatureCombinationFinalizes) {
  if (!cudnn_library()) GTEST_SKIP() << "no cuDNN here";
  struct Case {
    const char* feature;
    AttentionDesc d;
    int ops;
  };
  const Case cases[] = {
      {"dense", desc(2, 8, 8, 128, 128, 128), kBaseOps},
      {"dense lse", desc(2, 8, 8, 128, 128, 64, false, false, true), kBaseOps},
      {"causal S == Skv", desc(2, 8, 8, 128, 128, 128, true), kBaseOps + kCausalOps},
      {"causal Skv > S", desc(2, 8, 8, 64, 192, 128, true), kBaseOps + kCausalOps},
      {"causal S > Skv (padded)", desc(2, 8, 8, 192, 64, 128, true),
       kBaseOps + kPaddingOps + kCausalOps},
      {"grouped heads", desc(2, 32, 4, 256, 256, 128, true, false, true), kBaseOps + kCausalOps},
      {"one kv head", desc(1, 16, 1, 77, 300, 64), kBaseOps},
      {"lens", desc(3, 4, 4, 77, 128, 256, false, true, true), kBaseOps + kPaddingOps},
      {"lens causal", desc(3, 4, 2, 77, 128, 64, true, true, true),
       kBaseOps + kPaddingOps + kCausalOps},
      {"decode S=1", desc(4, 8, 8, 1, 1000, 128), kBaseOps},
  };
  for (const Case& c : cases) {
    for (DType t : {DType::bf16, DType::f16}) {
      AttentionDesc d = c.d;
      d.dtype = t;
      try {
        EXPECT_EQ(cudnn_attention_graph_check(d), c.ops) << c.feature << ": " << d.str();
      } catch (const Error& e) {
        ADD_FAILURE() << c.feature << " (" << d.str() << "): " << e.what();
      }
    }
  }
}

TEST(CudnnGraph, StridedTensorsFinalize) {
  if (!cudnn_library()) GTEST_SKIP() << "no cuDNN here";
  // [B, S, H, D] memory (the layout models keep between projections) described by strides.
  AttentionDesc d = desc(2, 8, 2, 100, 100, 64, true);
  d.q_stride = d.o_stride = {100 * 8 * 64, 64, 8 * 64, 1};
  d.k_stride = d.v_stride = {100 * 2 * 64, 64, 2 * 64, 1};
  EXPECT_EQ(cudnn_attention_graph_check(d), kBaseOps + kCausalOps);
}

TEST(CudnnGraph, PaddingIsUsedForLensAndForCausalWithMoreQueriesThanKeys) {
  EXPECT_FALSE(cudnn::sdpa_needs_padding(desc(1, 1, 1, 64, 64, 64, true)));
  EXPECT_FALSE(cudnn::sdpa_needs_padding(desc(1, 1, 1, 64, 128, 64, true)));
  EXPECT_TRUE(cudnn::sdpa_needs_padding(desc(1, 1, 1, 128, 64, 64, true)));
  EXPECT_FALSE(cudnn::sdpa_needs_padding(desc(1, 1, 1, 128, 64, 64, false)));
  EXPECT_TRUE(cudnn::sdpa_needs_padding(desc(1, 1, 1, 64, 64, 64, false, true)));
}

TEST(CudnnGraph, KnownLimitsAreReportedInWords) {
  using cudnn::sdpa_known_limits;
  EXPECT_EQ(sdpa_known_limits(desc(1, 1, 1, 77, 77, 128, true), 91400), "");
  EXPECT_EQ(sdpa_known_limits(desc(1, 1, 1, 1, 77, 256, true), 91400), "");
  std::string why = sdpa_known_limits(desc(1, 1, 1, 64, 64, 100), 91400);
  EXPECT_NE(why.find("head dim D=100"), std::string::npos) << why;
  why = sdpa_known_limits(desc(1, 1, 1, 64, 64, 512), 91900);
  EXPECT_NE(why.find("at most 256"), std::string::npos) << why;
  why = sdpa_known_limits(desc(1, 1, 1, 77, 77, 128, true), 90500);
  EXPECT_NE(why.find("needs cuDNN 9.6 or newer (loaded: 9.5.0)"), std::string::npos) << why;
  EXPECT_EQ(sdpa_known_limits(desc(1, 1, 1, 128, 128, 128, true), 90500), "");
  why = sdpa_known_limits(desc(1, 1, 1, 1, 77, 128, true), 90900);
  EXPECT_NE(why.find("S=1"), std::string::npos) << why;
  why = sdpa_known_limits(desc(1, 1, 1, 64, 64, 64), 91000);
  EXPECT_NE(why.find("known bugs"), std::string::npos) << why;
  why = sdpa_known_limits(desc(1, 1, 1, 64, 64, 64), 80907);
  EXPECT_NE(why.find("needs cuDNN 9"), std::string::npos) << why;
}

TEST(CudnnGraph, MalformedDescriptionsAreUserErrors) {
  AttentionDesc d = desc(1, 6, 4, 16, 16, 64);
  try {
    cudnn_attention_graph_check(d);
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("Hkv=4 does not divide H=6"), std::string::npos)
        << e.what();
  }
}
