// The paged KV cache of the Llama decode step on the GPU (label gpu, needs an sm_90a device):
// the paged cache append matches the interpreter, and the paged step agrees with the
// contiguous one (pinned kernels on both, and fallbacks on both: the framework gathers the
// pages) at Llama-3-8B sizes, batch 8 over caches of 4096 with 2 layers, and over ragged caches
// at a small size; the paged model run's two paths agree and dispatch paged problems.
#include <cmath>
#include <gtest/gtest.h>
#include <iostream>

#include "codegen/cpu/Interpreter.h"
#include "llama/DeviceExec.h"
#include "llama/Llama.h"
#include "llama/ModelRun.h"
#include "tilepilot/operator.h"

using namespace tp;
using namespace tp::models;

namespace {

const std::set<std::string> kDecodeOps = {"gemm", "rmsnorm", "rope", "decode_attention", "swiglu"};

LlamaConfig llama3_decode(int64_t paged_kv) {
  return parse_llama_config({{"mode", "decode"},
                             {"layers", "2"},
                             {"batch", "8"},
                             {"kv_len", "4096"},
                             {"paged_kv", std::to_string(paged_kv)}});
}

/// Head dim 64, ragged caches of which one is a single entry (one partly filled page).
LlamaConfig small_ragged_decode(int64_t paged_kv) {
  return parse_llama_config({{"mode", "decode"},
                             {"hidden", "256"},
                             {"heads", "4"},
                             {"kv_heads", "2"},
                             {"ffn", "640"},
                             {"vocab", "1000"},
                             {"layers", "2"},
                             {"batch", "3"},
                             {"kv_len", "100:1:257"},
                             {"paged_kv", std::to_string(paged_kv)}});
}

/// One decode step's logits on the GPU: every operator pinned to its default sm_90a config
/// for this model's problems, or every operator on its fallback.
HostTensor gpu_logits(const LlamaConfig& c, bool pinned, ops::OpCounters* attention) {
  ops::DispatchOptions o;
  o.log = [](const std::string&) {};
  if (!pinned) o.force_fallback = kDecodeOps;
  ops::Dispatcher d(o);
  if (pinned) {
    const ops::DeviceIdentity dev = ops::current_device();
    std::map<std::string, std::vector<ops::Pin>> pins;
    for (const auto& [label, p] : llama_problems(c))
      pins[p.op].push_back({p, ops::default_config(p, dev.arch)});
    for (const auto& [op, list] : pins)
      d.pin(op, dev, list);
  }
  DeviceExec ex;
  ex.set_dispatcher(&d);
  LlamaModel m(c, ex);
  HostTensor logits = ex.download(m.forward());
  *attention = d.counters("decode_attention");
  return logits;
}

void expect_close(const HostTensor& a, const HostTensor& b, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  int64_t bad = 0;
  double worst = 0, err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(a.get(i) - b.get(i));
    worst = std::max(worst, std::isfinite(d) ? d : INFINITY);
    err2 += d * d;
    ref2 += b.get(i) * b.get(i);
    if (!(d <= atol + rtol * std::fabs(b.get(i))) && bad++ < 3)
      ADD_FAILURE() << what << " at " << i << ": " << a.get(i) << " vs " << b.get(i);
  }
  EXPECT_EQ(bad, 0) << what << ": max |diff| " << worst;
  EXPECT_LT(std::sqrt(err2 / std::max(ref2, 1e-30)), 2e-2) << what << ": relative L2 error";
}

void expect_paged_agrees_with_contiguous(const LlamaConfig& paged, const LlamaConfig& contiguous) {
  for (bool pinned : {true, false}) {
    SCOPED_TRACE(pinned ? "pinned kernels" : "fallbacks");
    ops::OpCounters p, c;
    HostTensor lp = gpu_logits(paged, pinned, &p), lc = gpu_logits(contiguous, pinned, &c);
    expect_close(lp, lc, 0.1, 0.05, "logits, paged vs contiguous");
    EXPECT_EQ(p.pinned, pinned ? paged.layers : 0);
    EXPECT_EQ(p.fallbacks(), pinned ? 0 : paged.layers);
  }
}

} // namespace

TEST(GpuLlamaPaged, PagedCacheAppendMatchesTheInterpreter) {
  LlamaConfig c = small_ragged_decode(16);
  LlamaKernels k(c);
  const int64_t B = c.batch, Hkv = c.kv_heads, D = c.head_dim, MB = c.pages_per_seq();
  const int64_t P = c.cache_pages(), blk = c.paged_kv;
  HostTensor table(DType::i32, {B, MB}), pos(DType::i32, {B});
  const std::vector<int64_t> t = llama_block_table(c);
  for (size_t i = 0; i < t.size(); ++i)
    table.set(static_cast<int64_t>(i), static_cast<double>(t[i]));
  for (int64_t b = 0; b < B; ++b)
    pos.set(b, static_cast<double>(c.kv_len_of(b)));
  HostTensor kr(c.dtype, {B, Hkv, D}), qkv(c.dtype, {B, c.qkv_dim()});
  HostTensor kp(c.dtype, {P, Hkv, blk, D}), vp(c.dtype, {P, Hkv, blk, D});
  kr.fill_random(1);
  qkv.fill_random(2);
  kp.fill_random(3);
  vp.fill_random(4);
  DeviceExec dev;
  auto on_device = [&](const HostTensor& h) {
    Buf b = dev.alloc(h.dtype(), h.shape());
    dev.upload(b, h);
    return b;
  };
  Buf dkr = on_device(kr), dqkv = on_device(qkv), dtable = on_device(table);
  Buf dpos = on_device(pos), dkp = on_device(kp), dvp = on_device(vp);
  cpu::interpret(k.cache_append_paged, {&kr, &qkv, &pos, &table, &kp, &vp});
  dev.run(k.cache_append_paged, {&dkr, &dqkv, &dpos, &dtable, &dkp, &dvp});
  // The kernel copies elements without arithmetic: the results are the same bits.
  for (auto [host, buf, what] : {std::tuple{&kp, &dkp, "k pages"}, {&vp, &dvp, "v pages"}}) {
    HostTensor got = dev.download(*buf);
    int64_t bad = 0;
    for (int64_t i = 0; i < got.numel(); ++i)
      bad += got.get(i) != host->get(i);
    EXPECT_EQ(bad, 0) << what;
  }
}

TEST(GpuLlamaPaged, Llama3PagedDecodeStepAtBatch8OverCachesOf4096AgreesWithContiguous) {
  expect_paged_agrees_with_contiguous(llama3_decode(16), llama3_decode(0));
}

TEST(GpuLlamaPaged, SmallRaggedPagedDecodeStepAgreesWithContiguous) {
  expect_paged_agrees_with_contiguous(small_ragged_decode(16), small_ragged_decode(0));
  expect_paged_agrees_with_contiguous(small_ragged_decode(64), small_ragged_decode(0));
}

TEST(GpuLlamaPaged, Llama3PagedModelRunAgreesAndDispatchesPagedProblems) {
  ModelRunOptions o;
  o.config = llama3_decode(16);
  o.device = true;
  o.pin_defaults = true;
  o.runs = 3;
  o.warmup = 1;
  o.progress = [](const std::string& s) { std::cout << "  " << s << "\n"; };
  ModelRunResult r = run_llama(o);
  std::cout << to_text(r) << "\n";
  EXPECT_TRUE(r.agree);
  EXPECT_LT(r.rel_l2_err, 2e-2);
  EXPECT_NE(r.model.find("paged KV, 16-token pages"), std::string::npos) << r.model;
  for (const ModelRoute& m : r.routes) {
    EXPECT_TRUE(m.decision.pinned) << m.label << ": " << m.decision.why;
    if (m.problem.op == "decode_attention") EXPECT_EQ(m.problem.at("paged"), 1);
  }
  EXPECT_EQ(r.kernel_dispatch.find("fallback ("), std::string::npos)
      << "kernel run fell back: " << r.kernel_dispatch;
}
