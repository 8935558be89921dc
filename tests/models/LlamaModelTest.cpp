// The Llama prefill on the CPU interpreter: the tiny model run with the pinned kernels and with
// the fallbacks agrees; the dispatcher saw what it should; configs parse with clear errors; the
// paired statistics are right.
#include <cmath>
#include <gtest/gtest.h>

#include "llama/Llama.h"
#include "llama/ModelRun.h"

using namespace tp;
using namespace tp::models;

namespace {

ModelRunOptions tiny_on_host() {
  ModelRunOptions o;
  o.config = LlamaConfig::tiny();
  o.device = false;
  o.pin_defaults = true;
  o.runs = 2;
  o.warmup = 0;
  o.dispatch.log = [](const std::string&) {};
  return o;
}

} // namespace

TEST(LlamaModel, TinyModelAgreesBetweenPinnedKernelsAndFallbacks) {
  ModelRunResult r = run_llama(tiny_on_host());
  EXPECT_TRUE(r.agree) << to_text(r);
  EXPECT_GT(r.compared, 0);
  EXPECT_GT(r.max_abs_err, 0) << "the two runs use different arithmetic; identical logits would "
                                 "mean one of them did not run";
  EXPECT_LT(r.rel_l2_err, 2e-2) << to_text(r);
  // 5 GEMMs, attention, 3 RMSNorms (first, fused residual, final last-token), rope, swiglu.
  ASSERT_EQ(r.routes.size(), 11u);
  for (const ModelRoute& m : r.routes)
    EXPECT_TRUE(m.decision.pinned) << m.label;
  // One profiled forward: 5 GEMMs per layer... 4 per layer plus the LM head, one attention each.
  const int64_t L = r.routes.empty() ? 0 : LlamaConfig::tiny().layers;
  EXPECT_NE(r.kernel_dispatch.find("gemm: " + std::to_string(4 * L + 1) + " pinned, 0 fallback"),
            std::string::npos)
      << r.kernel_dispatch;
  EXPECT_NE(r.kernel_dispatch.find("attention: " + std::to_string(L) + " pinned"),
            std::string::npos)
      << r.kernel_dispatch;
  EXPECT_NE(r.fallback_dispatch.find("(forced " + std::to_string(4 * L + 1)), std::string::npos)
      << r.fallback_dispatch;
  // The element-wise operators go through the dispatcher too.
  for (auto [op, n] : {std::pair{"rmsnorm", 2 * L + 1}, {"rope", L}, {"swiglu", L}})
    EXPECT_NE(r.kernel_dispatch.find(std::string(op) + ": " + std::to_string(n) + " pinned, 0"),
              std::string::npos)
        << r.kernel_dispatch;
  for (const char* op : {"embedding", "rmsnorm", "gemm.qkv", "split_qk", "rope", "to_heads",
                         "attention", "merge_heads", "gemm.o", "gemm.gate_up", "swiglu",
                         "gemm.down", "gather_last", "gemm.lm_head"})
    EXPECT_TRUE(r.kernel_ops.count(op)) << op;
  EXPECT_EQ(r.stats.runs, 2);
  EXPECT_GT(r.stats.a_mean, 0);
  nlohmann::json j = to_json(r);
  for (const char* k : {"model", "device", "routes", "kernel_ms_mean", "fallback_ms_mean",
                        "change_pct", "ci95_pct", "profile", "memory", "agreement", "dispatch"})
    EXPECT_TRUE(j.contains(k)) << k;
}

TEST(LlamaModel, OperatorsLeftOutRunTheirFallbackInBothRuns) {
  ModelRunOptions o = tiny_on_host();
  o.ops = {"gemm"};
  o.runs = 1;
  ModelRunResult r = run_llama(o);
  EXPECT_TRUE(r.agree) << to_text(r);
  for (const ModelRoute& m : r.routes) {
    EXPECT_EQ(m.decision.pinned, m.problem.op == "gemm") << m.label;
    if (m.problem.op != "gemm") EXPECT_EQ(m.decision.reason, ops::FallbackReason::forced);
  }
  EXPECT_TRUE(std::isnan(r.stats.ci_low_pct)) << "one run has no confidence interval";
}

TEST(LlamaModel, WithoutAReleaseTheKernelRunFallsBackToo) {
  ModelRunOptions o = tiny_on_host();
  o.pin_defaults = false;
  o.runs = 1;
  ModelRunResult r = run_llama(o);
  EXPECT_TRUE(r.agree);
  EXPECT_EQ(r.max_abs_err, 0) << "both runs took the same fallbacks";
  for (const ModelRoute& m : r.routes)
    EXPECT_EQ(m.decision.reason, ops::FallbackReason::no_release);
}

TEST(LlamaModel, ProblemsMatchTheGemmPilotShapesAtLlama3Sizes) {
  LlamaConfig c = parse_llama_config({{"tokens", "4096"}});
  auto ps = llama_problems(c);
  EXPECT_EQ(ps[0].second.shape_str(), "K=4096,M=4096,N=6144,layout=nt");
  EXPECT_EQ(ps[1].second.shape_str(), "K=4096,M=4096,N=4096,layout=nt");
  EXPECT_EQ(ps[2].second.shape_str(), "K=4096,M=4096,N=28672,layout=nt");
  EXPECT_EQ(ps[3].second.shape_str(), "K=14336,M=4096,N=4096,layout=nt");
  EXPECT_EQ(ps[4].second.shape_str(), "K=4096,M=1,N=128256,layout=nt");
  EXPECT_EQ(ps[5].second.shape_str(), "B=1,D=128,H=32,Hkv=8,S=4096,Skv=4096,causal=1,lse=0");
  EXPECT_EQ(ps[6].second.shape_str(), "H=4096,T=4096,residual=0");
  EXPECT_EQ(ps[8].second.shape_str(), "H=4096,T=1,residual=1"); // the last token's final norm
}

TEST(LlamaConfig, ParsesSettingsAndRejectsBadOnes) {
  LlamaConfig c = parse_llama_config({{"preset", "tiny"}, {"layers", "3"}, {"seq", "9"}});
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.seq, 9);
  EXPECT_EQ(c.hidden, 64);
  c = parse_llama_config({{"hidden", "2048"}, {"heads", "16"}, {"kv_heads", "4"}});
  EXPECT_EQ(c.head_dim, 128);
  c = parse_llama_config({{"batch", "4"}, {"tokens", "16384"}, {"mlp", "8192"}});
  EXPECT_EQ(c.seq, 4096);
  EXPECT_EQ(c.ffn, 8192);
  auto message = [](std::map<std::string, std::string> kv) {
    try {
      parse_llama_config(kv);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"layer", "2"}}).find("unknown setting 'layer'"), std::string::npos);
  EXPECT_NE(message({{"kv_heads", "5"}}).find("does not divide"), std::string::npos);
  EXPECT_NE(message({{"seq", "0"}}).find("positive"), std::string::npos);
  EXPECT_NE(message({{"tokens", "5"}, {"batch", "2"}}).find("multiple of batch"),
            std::string::npos);
  EXPECT_NE(message({{"head_dim", "24"}}).find("multiple of 16"), std::string::npos);
  EXPECT_NE(message({{"preset", "gpt2"}}).find("unknown"), std::string::npos);
}

TEST(PairedStats, MeanChangeAndConfidenceInterval) {
  PairedStats s = paired_stats({9, 11, 10, 10}, {10, 12, 11, 11});
  EXPECT_DOUBLE_EQ(s.a_mean, 10);
  EXPECT_DOUBLE_EQ(s.b_mean, 11);
  EXPECT_NEAR(s.change_pct, -100.0 / 11, 1e-9);
  // Every difference is exactly -1: no spread, the interval is a point.
  EXPECT_NEAR(s.ci_low_pct, s.change_pct, 1e-9);
  EXPECT_NEAR(s.ci_high_pct, s.change_pct, 1e-9);
  s = paired_stats({1, 3}, {2, 2});
  EXPECT_NEAR(s.change_pct, 0, 1e-12);
  // differences -1, +1: sd sqrt(2), half width t(1) * sd / sqrt(2) = 12.706.
  EXPECT_NEAR(s.ci_high_pct, 100 * 12.706 / 2, 1e-6);
  EXPECT_DOUBLE_EQ(t_quantile_975(1000), 1.96);
}
