// The Llama decode step on the CPU interpreter: the tiny decode model run with the pinned
// kernels and with the fallbacks agrees, every operator of the step goes through the
// dispatcher, forced fallbacks are honoured and counted, a step can be repeated exactly, the
// bottleneck is the family with the largest share, and bad decode settings are clear errors.
#include <cmath>
#include <gtest/gtest.h>

#include "llama/HostExec.h"
#include "llama/Llama.h"
#include "llama/ModelRun.h"

using namespace tp;
using namespace tp::models;

namespace {

ModelRunOptions tiny_decode_on_host() {
  ModelRunOptions o;
  o.config = LlamaConfig::tiny_decode();
  o.device = false;
  o.pin_defaults = true;
  o.runs = 1;
  o.warmup = 0;
  o.dispatch.log = [](const std::string&) {};
  return o;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string config_error(std::map<std::string, std::string> kv) {
  kv.emplace("mode", "decode");
  try {
    parse_llama_config(kv);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST(LlamaDecode, TinyStepAgreesBetweenPinnedKernelsAndFallbacks) {
  ModelRunResult r = run_llama(tiny_decode_on_host());
  EXPECT_TRUE(r.agree) << to_text(r);
  EXPECT_GT(r.max_abs_err, 0) << "the two runs use different arithmetic; identical logits would "
                                 "mean one of them did not run";
  EXPECT_LT(r.rel_l2_err, 2e-2) << to_text(r);
  EXPECT_EQ(r.compared, LlamaConfig::tiny_decode().batch * LlamaConfig::tiny_decode().vocab);
  std::set<std::string> ops;
  for (const ModelRoute& m : r.routes) {
    ops.insert(m.problem.op);
    EXPECT_TRUE(m.decision.pinned) << m.label << ": " << m.decision.why;
  }
  EXPECT_EQ(ops, (std::set<std::string>{"gemm", "rmsnorm", "rope", "decode_attention", "swiglu"}));
  // Every GEMM has M = batch; decode_attention reads a cache of the longest kv_len + 1.
  for (const ModelRoute& m : r.routes) {
    if (m.problem.op == "gemm") EXPECT_EQ(m.problem.at("M"), 3) << m.label;
    if (m.problem.op == "decode_attention") {
      EXPECT_EQ(m.problem.at("L"), 41);
      EXPECT_EQ(m.problem.at("Sq"), 1);
      EXPECT_EQ(m.problem.options.at("lens"), "runtime");
    }
  }
  // Per forward of L layers: 4 GEMMs a layer + LM head; a norm before attention and before the
  // MLP + the final one; one rope, decode_attention and swiglu a layer.
  const int64_t L = LlamaConfig::tiny_decode().layers;
  for (auto [op, n] : {std::pair{"gemm", 4 * L + 1},
                       {"rmsnorm", 2 * L + 1},
                       {"rope", L},
                       {"decode_attention", L},
                       {"swiglu", L}}) {
    EXPECT_TRUE(has(r.kernel_dispatch, std::string(op) + ": " + std::to_string(n) +
                                           " pinned, 0 "
                                           "fallback"))
        << r.kernel_dispatch;
    EXPECT_TRUE(has(r.fallback_dispatch, std::string(op) + ": 0 pinned, " + std::to_string(n) +
                                             " fallback (forced " + std::to_string(n)))
        << r.fallback_dispatch;
  }
  for (const char* label :
       {"embedding", "rmsnorm", "gemm.qkv", "split_qk", "rope", "cache_append", "decode_attention",
        "gemm.o", "gemm.gate_up", "swiglu", "gemm.down", "gemm.lm_head"})
    EXPECT_TRUE(r.kernel_ops.count(label)) << label;
  EXPECT_FALSE(r.kernel_ops.count("attention")) << "the prefill's attention ran in a decode step";
  EXPECT_GT(r.cache_bytes, 0u);
  EXPECT_TRUE(has(r.model, "llama-decode")) << r.model;
}

TEST(LlamaDecode, ForcedFallbacksAreTakenAndCountedInTheKernelRun) {
  ModelRunOptions o = tiny_decode_on_host();
  o.ops.erase("decode_attention");         // left out: its fallback in both runs
  o.dispatch.force_fallback = {"rmsnorm"}; // forced by the dispatcher's own option
  ModelRunResult r = run_llama(o);
  EXPECT_TRUE(r.agree) << to_text(r);
  for (const ModelRoute& m : r.routes) {
    const bool forced = m.problem.op == "decode_attention" || m.problem.op == "rmsnorm";
    EXPECT_EQ(m.decision.pinned, !forced) << m.label;
    if (forced) EXPECT_EQ(m.decision.reason, ops::FallbackReason::forced) << m.label;
  }
  const int64_t L = LlamaConfig::tiny_decode().layers;
  EXPECT_TRUE(has(r.kernel_dispatch, "rmsnorm: 0 pinned, " + std::to_string(2 * L + 1) +
                                         " fallback (forced " + std::to_string(2 * L + 1)))
      << r.kernel_dispatch;
  EXPECT_TRUE(has(r.kernel_dispatch, "decode_attention: 0 pinned, " + std::to_string(L) +
                                         " fallback (forced " + std::to_string(L)))
      << r.kernel_dispatch;
  EXPECT_TRUE(has(r.kernel_dispatch, "rope: " + std::to_string(L) + " pinned"))
      << r.kernel_dispatch;
}

TEST(LlamaDecode, RepeatedStepsGiveIdenticalLogitsAndDependOnTheCacheLengths) {
  auto logits = [](const LlamaConfig& c) {
    ops::DispatchOptions d;
    d.force_fallback = {"gemm", "rmsnorm", "rope", "decode_attention", "swiglu"};
    d.log = [](const std::string&) {};
    ops::Dispatcher disp(d);
    HostExec ex;
    ex.set_dispatcher(&disp);
    LlamaModel m(c, ex);
    HostTensor first = ex.download(m.forward());
    HostTensor second = ex.download(m.forward());
    for (int64_t i = 0; i < first.numel(); ++i)
      EXPECT_EQ(first.get(i), second.get(i)) << "a step overwrites its own cache entry; at " << i;
    return first;
  };
  LlamaConfig c = LlamaConfig::tiny_decode();
  HostTensor a = logits(c);
  c.kv_lens = {6, 40, 17}; // sequence 0 sees one cached entry more, at the next position
  HostTensor b = logits(c);
  const int64_t V = c.vocab;
  double moved[3] = {0, 0, 0};
  for (int64_t b_ = 0; b_ < 3; ++b_)
    for (int64_t v = 0; v < V; ++v)
      moved[b_] += std::fabs(a.get(b_ * V + v) - b.get(b_ * V + v));
  // Same cache capacity and contents: only the sequence whose length changed moves.
  EXPECT_GT(moved[0], 0);
  EXPECT_EQ(moved[1], 0);
  EXPECT_EQ(moved[2], 0);
}

TEST(LlamaDecode, ProblemsAtLlama3SizesAreTheDecodeShapes) {
  LlamaConfig c = parse_llama_config({{"mode", "decode"}, {"batch", "8"}, {"kv_len", "4096"}});
  std::map<std::string, std::string> shapes;
  for (const auto& [label, p] : llama_problems(c))
    shapes[label] = p.shape_str();
  EXPECT_EQ(shapes["gemm.qkv"], "K=4096,M=8,N=6144,layout=nt");
  EXPECT_EQ(shapes["gemm.lm_head"], "K=4096,M=8,N=128256,layout=nt");
  EXPECT_EQ(shapes["decode_attention"], "B=8,D=128,H=32,Hkv=8,L=4097,Sq=1,paged=0,lens=runtime");
  EXPECT_EQ(shapes["rmsnorm.residual"], "H=4096,T=8,residual=1");
  EXPECT_EQ(shapes["rope"], "D=128,H=32,Hkv=8,T=8,base=500000,start=0,scaling=none");
  EXPECT_EQ(shapes["swiglu"], "I=14336,T=8");
  EXPECT_FALSE(shapes.count("attention"));
  EXPECT_EQ(c.str(), "llama-decode 2 layers, batch 8, kv_len 4096, hidden 4096, heads 32/8x128, "
                     "ffn 14336, vocab 128256, bf16, contiguous KV");
}

TEST(LlamaDecode, BottleneckIsTheFamilyWithTheLargestShare) {
  Bottleneck b = bottleneck({{"gemm.qkv", 2}, {"gemm.o", 2}, {"decode_attention", 3}, {"rope", 1}});
  EXPECT_EQ(b.family, "gemm");
  EXPECT_DOUBLE_EQ(b.ms, 4);
  EXPECT_DOUBLE_EQ(b.share, 0.5);
  EXPECT_EQ(bottleneck({}).family, "");
  ModelRunResult r = run_llama(tiny_decode_on_host());
  Bottleneck k = bottleneck(r.kernel_ops);
  for (const auto& [label, ms] : r.kernel_ops)
    EXPECT_LE(family_ms(r.kernel_ops, op_family(label)), k.ms + 1e-12) << label;
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j["bottleneck"]["kernel"]["family"], k.family);
  EXPECT_TRUE(j["bottleneck"].contains("fallback"));
  EXPECT_GT(j["memory"]["kv_cache_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(has(to_text(r), "bottleneck: " + k.family + " (")) << to_text(r);
}

TEST(LlamaDecode, ConfigParsesRaggedLengthsAndTheTinyPreset) {
  LlamaConfig c = parse_llama_config({{"mode", "decode"}, {"batch", "3"}, {"kv_len", "7:1:300"}});
  EXPECT_TRUE(c.decode());
  EXPECT_EQ(c.kv_len_of(0), 7);
  EXPECT_EQ(c.kv_len_of(1), 1);
  EXPECT_EQ(c.cache_capacity(), 301);
  EXPECT_EQ(c.tokens(), 3);
  c = parse_llama_config({{"preset", "tiny"}, {"mode", "decode"}});
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.kv_lens, (std::vector<int64_t>{5, 40, 17}));
  c = parse_llama_config({{"preset", "tiny"}, {"mode", "decode"}, {"batch", "2"}});
  EXPECT_TRUE(c.kv_lens.empty()) << "a new batch drops the preset's three lengths";
  EXPECT_EQ(c.kv_len_of(1), 40);
  EXPECT_FALSE(parse_llama_config({{"preset", "tiny"}}).decode());
}

TEST(LlamaDecode, BadSettingsAreUserErrorsThatSayWhatToChange) {
  EXPECT_TRUE(has(config_error({{"batch", "0"}}), "batch=0 is not a positive integer"));
  EXPECT_TRUE(has(config_error({{"kv_len", "0"}}), "kv_len=0 is not a positive integer"));
  EXPECT_TRUE(has(config_error({{"kv_len", "131072"}}), "Llama-3.1's context of 131072"));
  EXPECT_TRUE(has(config_error({{"batch", "64"}, {"kv_len", "32768"}}), "2^31 elements"));
  EXPECT_TRUE(has(config_error({{"batch", "64"}, {"kv_len", "32768"}}),
                  "kv_len at most 32766 at this batch"));
  EXPECT_TRUE(has(config_error({{"batch", "2"}, {"kv_len", "4:5:6"}}),
                  "kv_len lists 3 lengths for batch=2"));
  EXPECT_TRUE(has(config_error({{"kv_len", "4::6"}}), "kv_len= is not a positive integer"));
  EXPECT_TRUE(has(config_error({{"seq", "128"}}), "seq is a prefill setting"));
  EXPECT_TRUE(has(config_error({{"head_dim", "96"}}), "use 64 or 128"));
  EXPECT_TRUE(has(config_error({{"mode", "beam"}}), "mode=beam is unknown"));
  EXPECT_TRUE(has(config_error({{"eps", "1e-6"}}), "use eps=1e-5"));
  EXPECT_TRUE(has(config_error({{"rope_scaling", "yarn"}}), "use none or llama3"));
  // Llama-3-8B at batch 64 with caches of 32000 entries still fits.
  EXPECT_EQ(config_error({{"batch", "64"}, {"kv_len", "32000"}}), "no error");
  EXPECT_EQ(mode_of_path("llama-decode"), "decode");
  try {
    mode_of_path("llama-beam");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_TRUE(has(e.what(), "llama-prefill and llama-decode")) << e.what();
  }
}
