// The paged KV cache of the Llama decode step on the CPU interpreter: the block table is a
// shuffled permutation of the pool, the paged cache append writes only the new token's page
// slot, paged and contiguous steps give the same logits (uniform and ragged lengths, pinned
// kernels and fallbacks), the dispatcher sees paged=1 problems, a forced fallback agrees, the
// model line names the layout, and bad page sizes are clear errors (API and CLI, exit 2).
#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <numeric>

#include "RunCli.h"
#include "codegen/cpu/Interpreter.h"
#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "llama/HostExec.h"
#include "llama/Llama.h"
#include "llama/ModelRun.h"
#include "runtime/Jit.h"
#include "runtime/Nvrtc.h"
#include "tilepilot/operator.h"

using namespace tp;
using namespace tp::models;

namespace {

const std::set<std::string> kDecodeOps = {"gemm", "rmsnorm", "rope", "decode_attention", "swiglu"};

/// The tiny decode model (caches of 5, 40 and 17 entries, capacity 41), or with every
/// sequence at 40 cached entries, over pages of `block` tokens (0: contiguous).
LlamaConfig tiny(bool ragged, int64_t block) {
  LlamaConfig c = LlamaConfig::tiny_decode();
  if (!ragged) c.kv_lens.clear();
  c.paged_kv = block;
  c.validate();
  return c;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// One decode step's logits; `pinned`: every operator pinned to its default interpreter
/// config for exactly this model's problems, else every operator on its fp64 fallback.
HostTensor step_logits(const LlamaConfig& c, bool pinned, ops::OpCounters* attention = nullptr) {
  ops::DispatchOptions o;
  o.log = [](const std::string&) {};
  if (!pinned) o.force_fallback = kDecodeOps;
  ops::Dispatcher d(o);
  if (pinned) {
    std::map<std::string, std::vector<ops::Pin>> pins;
    for (const auto& [label, p] : llama_problems(c))
      pins[p.op].push_back({p, ops::default_config(p, "cpu")});
    for (const auto& [op, list] : pins)
      d.pin(op, {"CPU interpreter", "cpu"}, list);
  }
  HostExec ex;
  ex.set_dispatcher(&d);
  LlamaModel m(c, ex);
  HostTensor logits = ex.download(m.forward());
  if (attention) *attention = d.counters("decode_attention");
  return logits;
}

/// Max |a - b| and whether every element lies within atol + rtol |b|.
std::pair<double, bool> compare(const HostTensor& a, const HostTensor& b, double atol,
                                double rtol) {
  EXPECT_EQ(a.numel(), b.numel());
  double worst = 0;
  bool ok = a.numel() == b.numel() && a.numel() > 0;
  for (int64_t i = 0; ok && i < a.numel(); ++i) {
    const double d = std::fabs(a.get(i) - b.get(i));
    worst = std::max(worst, std::isfinite(d) ? d : INFINITY);
    ok = d <= atol + rtol * std::fabs(b.get(i));
  }
  return {worst, ok};
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

ModelRunOptions on_host(const LlamaConfig& c) {
  ModelRunOptions o;
  o.config = c;
  o.device = false;
  o.pin_defaults = true;
  o.runs = 1;
  o.warmup = 0;
  o.dispatch.log = [](const std::string&) {};
  return o;
}

} // namespace

TEST(LlamaPagedDecode, BlockTableIsASeededShuffledPermutationOfThePool) {
  LlamaConfig c = tiny(true, 16);
  EXPECT_EQ(c.pages_per_seq(), 3); // ceil(41 / 16)
  EXPECT_EQ(c.cache_pages(), 9);
  std::vector<int64_t> t = llama_block_table(c);
  ASSERT_EQ(t.size(), 9u);
  std::vector<int64_t> sorted = t, identity(9);
  std::sort(sorted.begin(), sorted.end());
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity) << "every entry names a distinct page of the pool";
  EXPECT_NE(t, identity) << "the table must not be the identity: a layout bug would hide";
  EXPECT_EQ(llama_block_table(c), t) << "the table is fixed by the seed";
  c.seed = 1;
  EXPECT_NE(llama_block_table(c), t) << "another seed shuffles the pool differently";
}

TEST(LlamaPagedDecode, PagedCacheAppendWritesOnlyTheNewTokensPageSlot) {
  LlamaConfig c = tiny(true, 16);
  LlamaKernels k(c);
  const int64_t B = c.batch, H = c.heads, Hkv = c.kv_heads, D = c.head_dim, W = c.qkv_dim();
  const int64_t MB = c.pages_per_seq(), P = c.cache_pages(), blk = c.paged_kv;
  HostTensor KR(c.dtype, {B, Hkv, D}), QKV(c.dtype, {B, W}), POS(DType::i32, {B});
  HostTensor TABLE(DType::i32, {B, MB}), KP(c.dtype, {P, Hkv, blk, D}), VP(KP.dtype(), KP.shape());
  KR.fill_random(1);
  QKV.fill_random(2);
  KP.fill_random(3);
  VP.fill_random(4);
  const std::vector<int64_t> table = llama_block_table(c);
  for (size_t i = 0; i < table.size(); ++i)
    TABLE.set(static_cast<int64_t>(i), static_cast<double>(table[i]));
  for (int64_t b = 0; b < B; ++b)
    POS.set(b, static_cast<double>(c.kv_len_of(b)));
  const HostTensor KP0 = KP, VP0 = VP;
  cpu::interpret(k.cache_append_paged, {&KR, &QKV, &POS, &TABLE, &KP, &VP});
  int64_t changed = 0, bad = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t pos = c.kv_len_of(b), page = table[b * MB + pos / blk], slot = pos % blk;
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t i = ((page * Hkv + h) * blk + slot) * D + d;
        bad += KP.get(i) != KR.get((b * Hkv + h) * D + d);
        bad += VP.get(i) != QKV.get(b * W + (H + Hkv + h) * D + d);
      }
  }
  for (int64_t i = 0; i < KP.numel(); ++i)
    changed += (KP.get(i) != KP0.get(i)) + (VP.get(i) != VP0.get(i));
  EXPECT_EQ(bad, 0) << "the new keys and values are not in their page slots";
  // Random values almost never repeat, so each written element differs from what was there.
  EXPECT_LE(changed, 2 * B * Hkv * D) << "the append wrote outside the new tokens' slots";
  EXPECT_GT(changed, B * Hkv * D);
}

class LlamaPagedDecodeLogits : public ::testing::TestWithParam<std::tuple<bool, int64_t>> {};

TEST_P(LlamaPagedDecodeLogits, PagedAndContiguousStepsGiveTheSameLogits) {
  const auto [ragged, block] = GetParam();
  const LlamaConfig contiguous = tiny(ragged, 0), paged = tiny(ragged, block);
  // Fallbacks: the fp64 reference reads the same values through the table, so the logits
  // are the same bits; any misplaced page or slot would change them.
  const auto [fb_err, fb_ok] =
      compare(step_logits(paged, false), step_logits(contiguous, false), 0, 0);
  EXPECT_TRUE(fb_ok) << "fallbacks: paged and contiguous logits differ by up to " << fb_err;
  // Pinned kernels: the paged kernel steps a page at a time, the contiguous one 64 keys, so
  // their bf16 roundings differ; they must agree as the model run's two paths do.
  ops::OpCounters counters;
  HostTensor pinned = step_logits(paged, true, &counters);
  const auto [err, ok] = compare(pinned, step_logits(contiguous, true), 0.1, 0.05);
  EXPECT_TRUE(ok) << "pinned kernels: paged and contiguous logits differ by up to " << err;
  EXPECT_EQ(counters.pinned, paged.layers) << "the paged kernel did not run on every layer";
  EXPECT_EQ(counters.fallbacks(), 0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, LlamaPagedDecodeLogits,
                         ::testing::Values(std::tuple{false, int64_t{16}},
                                           std::tuple{true, int64_t{16}},
                                           std::tuple{true, int64_t{32}}),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Ragged" : "Uniform") +
                                  "Pages" + std::to_string(std::get<1>(info.param));
                         });

TEST(LlamaPagedDecode, DispatchedProblemsArePagedAndOnlyPagedPinsCoverThem) {
  // A release (here: pins) covers exact problems, so the paged model's calls are pinned by
  // the paged problems and fall back, outside the matrix, under the contiguous ones.
  const LlamaConfig paged = tiny(true, 16), contiguous = tiny(true, 0);
  for (bool paged_pins : {true, false}) {
    ops::DispatchOptions o;
    o.log = [](const std::string&) {};
    ops::Dispatcher d(o);
    std::vector<ops::Pin> pins;
    for (const auto& [label, p] : llama_problems(paged_pins ? paged : contiguous))
      if (p.op == "decode_attention") {
        EXPECT_EQ(p.get("paged", 0), paged_pins ? 1 : 0);
        pins.push_back({p, ops::default_config(p, "cpu")});
      }
    d.pin("decode_attention", {"CPU interpreter", "cpu"}, pins);
    HostExec ex;
    ex.set_dispatcher(&d);
    LlamaModel m(paged, ex);
    m.forward();
    ops::OpCounters n = d.counters("decode_attention");
    EXPECT_EQ(n.pinned, paged_pins ? paged.layers : 0) << d.summary();
    EXPECT_EQ(n.count(ops::FallbackReason::shape_outside_matrix), paged_pins ? 0 : paged.layers)
        << d.summary();
  }
}

TEST(LlamaPagedDecode, ModelRunAgreesAndRoutesPagedProblems) {
  ModelRunResult r = run_llama(on_host(tiny(true, 16)));
  EXPECT_TRUE(r.agree) << to_text(r);
  EXPECT_GT(r.max_abs_err, 0) << "identical logits would mean one run did not take its path";
  bool routed = false;
  for (const ModelRoute& m : r.routes) {
    EXPECT_TRUE(m.decision.pinned) << m.label << ": " << m.decision.why;
    if (m.problem.op != "decode_attention") continue;
    routed = true;
    EXPECT_EQ(m.problem.at("paged"), 1);
    EXPECT_EQ(m.problem.at("block"), 16);
    EXPECT_EQ(m.problem.at("L"), 48) << "3 pages of 16 per sequence";
  }
  EXPECT_TRUE(routed);
  const std::string L = std::to_string(LlamaConfig::tiny_decode().layers);
  EXPECT_TRUE(has(r.kernel_dispatch, "decode_attention: " + L + " pinned, 0 fallback"))
      << r.kernel_dispatch;
  EXPECT_TRUE(has(r.fallback_dispatch, "decode_attention: 0 pinned, " + L + " fallback (forced"))
      << r.fallback_dispatch;
  EXPECT_TRUE(has(r.model, "paged KV, 16-token pages")) << r.model;
  EXPECT_TRUE(has(to_text(r), "paged KV, 16-token pages")) << to_text(r);
  // K and V pools of 9 pages x 2 kv heads x 16 x 64 bf16 per layer, and the i32 table.
  EXPECT_EQ(r.cache_bytes, 2u * 2 * 9 * 2 * 16 * 64 * 2 + 3 * 3 * 4);
}

TEST(LlamaPagedDecode, ForcedFallbackOfThePagedAttentionAgrees) {
  ModelRunOptions o = on_host(tiny(false, 16));
  o.dispatch.force_fallback = {"decode_attention"};
  ModelRunResult r = run_llama(o);
  EXPECT_TRUE(r.agree) << to_text(r);
  const std::string L = std::to_string(LlamaConfig::tiny_decode().layers);
  EXPECT_TRUE(has(r.kernel_dispatch, "decode_attention: 0 pinned, " + L + " fallback (forced " + L))
      << r.kernel_dispatch;
  EXPECT_TRUE(has(r.kernel_dispatch, "gemm: " + std::to_string(4 * 2 + 1) + " pinned"))
      << r.kernel_dispatch;
}

TEST(LlamaPagedDecode, ConfigParsesPageSizesAndNamesTheLayout) {
  LlamaConfig c = parse_llama_config({{"mode", "decode"}, {"batch", "8"}, {"paged_kv", "16"}});
  EXPECT_TRUE(c.paged());
  EXPECT_EQ(c.pages_per_seq(), 257); // ceil(4097 / 16)
  EXPECT_EQ(c.cache_pages(), 8 * 257);
  EXPECT_TRUE(has(c.str(), "bf16, paged KV, 16-token pages")) << c.str();
  c = parse_llama_config({{"mode", "decode"}, {"paged_kv", "0"}});
  EXPECT_FALSE(c.paged());
  EXPECT_EQ(c.pages_per_seq(), 0);
  EXPECT_TRUE(has(c.str(), "bf16, contiguous KV")) << c.str();
  c = parse_llama_config({{"preset", "tiny"}, {"mode", "decode"}, {"paged_kv", "32"}});
  EXPECT_EQ(c.kv_lens, (std::vector<int64_t>{5, 40, 17}));
  EXPECT_EQ(c.pages_per_seq(), 2);
  std::map<std::string, std::string> shapes;
  for (const auto& [label, p] : llama_problems(parse_llama_config(
           {{"mode", "decode"}, {"batch", "8"}, {"kv_len", "4096"}, {"paged_kv", "16"}})))
    shapes[label] = p.shape_str();
  EXPECT_EQ(shapes["decode_attention"], "B=8,D=128,H=32,Hkv=8,L=4112,Sq=1,block=16,paged=1");
}

TEST(LlamaPagedDecode, BadPageSizesAreUserErrorsThatSayWhatIsAllowed) {
  EXPECT_TRUE(has(config_error({{"paged_kv", "-16"}}),
                  "paged_kv=-16 is not a page size; use 16, 32, 64, 128 or 256"));
  EXPECT_TRUE(has(config_error({{"paged_kv", "sixteen"}}), "paged_kv=sixteen is not a page size"));
  EXPECT_TRUE(has(config_error({{"paged_kv", "24"}}),
                  "paged_kv=24 is not a page size decode_attention takes; use 16, 32, 64, 128 or "
                  "256 (powers of two)"));
  EXPECT_TRUE(has(config_error({{"paged_kv", "512"}}), "use 16, 32, 64, 128 or 256"));
  EXPECT_TRUE(has(config_error({{"preset", "tiny"}, {"paged_kv", "64"}}),
                  "paged_kv=64 is larger than the whole cache of 41 entries (the longest kv_len "
                  "+ 1); use a page size up to 41 (16, 32), or paged_kv=0"));
  EXPECT_TRUE(has(config_error({{"kv_len", "5"}, {"paged_kv", "16"}}),
                  "use paged_kv=0 (contiguous), or a kv_len of at least 15"));
  EXPECT_TRUE(has(config_error({{"batch", "64"}, {"kv_len", "32700"}, {"paged_kv", "256"}}),
                  "a paged KV pool of 8192 pages x 8 kv heads x 256 tokens x 128 has over 2^31"));
  EXPECT_EQ(config_error({{"batch", "64"}, {"kv_len", "32700"}, {"paged_kv", "16"}}), "no error");
  try {
    parse_llama_config({{"paged_kv", "16"}});
    FAIL() << "a prefill took paged_kv";
  } catch (const UserError& e) {
    EXPECT_TRUE(has(e.what(), "paged_kv=16 is a decode setting")) << e.what();
  }
  EXPECT_TRUE(has(config_error({{"colour", "blue"}}), "kv_len, paged_kv, hidden"));
}

TEST(LlamaPagedDecode, CliRunsThePagedStepAndRejectsBadPageSizesWithExit2) {
  const std::string tiny_decode = "model --backend cpu --preset tiny --path llama-decode ";
  for (const char* how : {"--paged-kv 16", "--set paged_kv=16"}) {
    auto r = tp::testing::run_cli(tiny_decode + how + " --pin-defaults --runs 1 --warmup 0");
    EXPECT_EQ(r.rc, 0) << how << ": " << r.out;
    EXPECT_TRUE(has(r.out, "paged KV, 16-token pages")) << how << ": " << r.out;
  }
  for (auto [args, message] :
       {std::pair{"--paged-kv 24", "paged_kv=24 is not a page size decode_attention takes"},
        {"--paged-kv -1", "paged_kv=-1 is not a page size"},
        {"--set paged_kv=64", "paged_kv=64 is larger than the whole cache of 41 entries"}}) {
    auto r = tp::testing::run_cli(tiny_decode + args);
    EXPECT_EQ(r.rc, 2) << args << ": " << r.out;
    EXPECT_TRUE(has(r.out, message)) << args << ": " << r.out;
  }
  auto r = tp::testing::run_cli("model --backend cpu --preset tiny --paged-kv 16");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(has(r.out, "paged_kv=16 is a decode setting")) << r.out;
}

TEST(LlamaPagedDecode, PagedKernelsCompileForSm90aAtLlama3Sizes) {
  // What a paged step runs on an H200: the paged cache append and decode_attention's paged
  // default config must lower and compile, or the GPU run would fall back or fail.
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC: " << why;
  LlamaConfig c = parse_llama_config(
      {{"mode", "decode"}, {"batch", "8"}, {"kv_len", "4096"}, {"paged_kv", "16"}});
  LlamaKernels k(c);
  std::vector<Kernel> kernels = {k.cache_append_paged};
  for (const auto& [label, p] : llama_problems(c))
    if (p.op == "decode_attention") {
      const ops::Operator& op = ops::find_operator(p.op);
      kernels.push_back(op.build(p, op.default_config(p, "sm_90a")));
    }
  ASSERT_EQ(kernels.size(), 2u);
  for (const Kernel& kern : kernels) {
    SCOPED_TRACE(kern.node().name);
    cuda::LoweredKernel lk = cuda::lower_kernel(kern, passes::Target::parse("sm_90a"));
    rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, "sm_90a", {});
    EXPECT_FALSE(j.compiled.cubin.empty());
  }
}
