// Config spaces: the per-arch knob narrowing, each pre-compile pruning rule with its reason,
// the post-compile spill rule, --space parsing, and the heuristic order.
#include <gtest/gtest.h>

#include <set>

#include "autotune/ConfigSpace.h"
#include "autotune/Hooks.h"
#include "ops/Operator.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::autotune;

namespace {

ops::Problem gemm_problem(int64_t M = 4096, int64_t N = 4096, int64_t K = 4096) {
  return ops::find_operator("gemm").parse(
      {{"M", std::to_string(M)}, {"N", std::to_string(N)}, {"K", std::to_string(K)}}, bf16);
}

ops::Problem attention_problem(int64_t D) {
  return ops::find_operator("attention")
      .parse({{"B", "2"}, {"H", "8"}, {"S", "1024"}, {"D", std::to_string(D)}}, bf16);
}

const std::vector<int64_t>& values(const std::vector<ops::Knob>& ks, const std::string& name) {
  for (const ops::Knob& k : ks)
    if (k.name == name) return k.values;
  throw std::runtime_error("no knob " + name);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return tp::autotune::reason_text(e);
  }
  return "<no user error>";
}

} // namespace

TEST(ConfigSpace, GemmOnSm90aFixesBkAndDropsSingleStage) {
  auto ks = knob_space(ops::find_operator("gemm"), "sm_90a");
  EXPECT_EQ(values(ks, "bk"), (std::vector<int64_t>{64}));
  EXPECT_EQ(values(ks, "stages"), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(values(ks, "bm"), (std::vector<int64_t>{64, 128, 256}));
  EXPECT_EQ(values(ks, "bn"), (std::vector<int64_t>{32, 64, 128, 192, 256}));
  ConfigSpace s =
      enumerate(ops::find_operator("gemm"), gemm_problem(), TargetLimits::for_arch("sm_90a"), ks);
  EXPECT_EQ(values(ks, "cluster"), (std::vector<int64_t>{1, 2}));
  // Knob values cannot depend on the shape: splits 1, 2, 4, 8 at every M.
  EXPECT_EQ(values(ks, "splits"), (std::vector<int64_t>{1, 2, 4, 8}));
  // Persistent blocks are searched on sm_90a since the TMA stores (both values).
  EXPECT_EQ(values(ks, "persistent"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.total(), 3 * 5 * 1 * 4 * 3 * 4 * 2 * 4 * 2);
  EXPECT_FALSE(s.kept.empty());
  for (const Candidate& c : s.pruned) {
    EXPECT_FALSE(c.reason.empty()) << ops::config_str(c.config);
    EXPECT_FALSE(c.category.empty()) << ops::config_str(c.config);
  }
}

// Attention: the deferred P.V (overlap, the sm_90a default) and persistent blocks are searched
// on sm_90a only (they need warp-specialized TMA kernels); ping-pong, measured slower, is not.
TEST(ConfigSpace, AttentionScheduleKnobsPerArch) {
  const ops::Operator& att = ops::find_operator("attention");
  auto h = knob_space(att, "sm_90a");
  EXPECT_EQ(values(h, "overlap"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(values(h, "persistent"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(values(h, "pingpong"), (std::vector<int64_t>{0}));
  auto a = knob_space(att, "sm_80");
  EXPECT_EQ(values(a, "overlap"), (std::vector<int64_t>{0}));
  EXPECT_EQ(values(a, "persistent"), (std::vector<int64_t>{0}));
  // The default (overlap with three stages) is in the sm_90a space and survives pruning.
  ops::Problem p = attention_problem(128);
  ops::Config def = att.default_config(p, "sm_90a");
  EXPECT_EQ(def.at("overlap"), 1);
  ConfigSpace s = enumerate(att, p, TargetLimits::for_arch("sm_90a"), h);
  bool kept = false;
  for (const Candidate& c : s.kept) {
    bool same = true;
    for (const auto& [k, v] : def)
      same = same && c.config.count(k) && c.config.at(k) == v;
    kept |= same;
  }
  EXPECT_TRUE(kept) << ops::config_str(def);
}

TEST(ConfigSpace, SharedMemoryOverTheDeviceLimitIsPrunedWithTheNumbers) {
  const auto& gemm = ops::find_operator("gemm");
  ops::Config c{{"bm", 256}, {"bn", 256}, {"bk", 64}, {"stages", 5}, {"threads", 384}};
  Candidate h = estimate(gemm, gemm_problem(), TargetLimits::for_arch("sm_90a"), c);
  // Three warpgroups do not split four 64-row slabs, so it is not lowered: 5 stages x (256x64 +
  // 64x256) bf16 tiles.
  EXPECT_EQ(h.smem_bytes, 5 * (256 * 64 + 64 * 256) * 2);
  EXPECT_EQ(h.category, "smem");
  EXPECT_NE(h.reason.find("shared memory 320.0 KB > 227.0 KB per block on sm_90a"),
            std::string::npos)
      << h.reason;
  // The compiler's plan: 5 stages of A and B tiles and 5 x 2 + 1 mbarriers on sm_90a.
  ops::Config mid{{"bm", 128}, {"bn", 192}, {"bk", 64}, {"stages", 5}, {"threads", 256}};
  Candidate h90 = estimate(gemm, gemm_problem(), TargetLimits::for_arch("sm_90a"), mid);
  EXPECT_EQ(h90.category, "");
  EXPECT_EQ(h90.smem_bytes, 5 * (128 * 64 + 64 * 192) * 2 + (5 * 2 + 1) * 8);
  // On sm_80 the loop is a cp.async pipeline with every stage of both tiles in shared memory:
  // 5 stages are over 163 KB, 3 fit.
  Candidate a = estimate(gemm, gemm_problem(), TargetLimits::for_arch("sm_80"), mid);
  EXPECT_EQ(a.category, "smem") << a.reason;
  EXPECT_EQ(a.smem_bytes, 5 * (128 * 64 + 64 * 192) * 2);
  EXPECT_NE(a.reason.find("shared memory 200.0 KB > 163.0 KB per block on sm_80"),
            std::string::npos)
      << a.reason;
  ops::Config mid3 = mid;
  mid3["stages"] = 3;
  Candidate a3 = estimate(gemm, gemm_problem(), TargetLimits::for_arch("sm_80"), mid3);
  EXPECT_EQ(a3.category, "") << a3.reason;
  EXPECT_EQ(a3.smem_bytes, 3 * (128 * 64 + 64 * 192) * 2);
  // Over sm_80's 163 KB even in one stage: pruned with the numbers.
  ops::Config big{{"bm", 512}, {"bn", 256}, {"bk", 128}, {"stages", 2}, {"threads", 1024}};
  Candidate b = estimate(gemm, gemm_problem(), TargetLimits::for_arch("sm_80"), big);
  EXPECT_EQ(b.category, "smem") << b.reason;
  EXPECT_NE(b.reason.find("> 163.0 KB per block on sm_80"), std::string::npos) << b.reason;
}

TEST(ConfigSpace, AttentionSharedMemoryCountsQOnceAndKVPerStage) {
  const auto& att = ops::find_operator("attention");
  ops::Config c{{"bm", 128}, {"bn", 128}, {"stages", 2}, {"threads", 256}};
  Candidate d128 = estimate(att, attention_problem(128), TargetLimits::for_arch("sm_90a"), c);
  // Q, two stages of K and V, and (room left at two stages) O's two TMA store chunk buffers.
  EXPECT_EQ(d128.smem_bytes, (128 * 128 + 2 * 2 * 128 * 128) * 2 + 2 * 128 * 128 + 5 * 8);
  EXPECT_EQ(d128.category, "");
  Candidate d256 = estimate(att, attention_problem(256), TargetLimits::for_arch("sm_90a"), c);
  EXPECT_EQ(d256.category, "smem") << d256.reason;
}

TEST(ConfigSpace, AccumulatorRegistersOverTheBudgetArePruned) {
  const auto& gemm = ops::find_operator("gemm");
  ops::Config c{{"bm", 256}, {"bn", 256}, {"bk", 64}, {"stages", 2}, {"threads", 256}};
  Candidate r = estimate(gemm, gemm_problem(), TargetLimits::for_arch("sm_90a"), c);
  EXPECT_EQ(r.acc_regs, 256);
  EXPECT_EQ(r.category, "regs");
  EXPECT_NE(r.reason.find("accumulator needs 256 registers per thread > 168"), std::string::npos)
      << r.reason;
  // The operator's default sm_90a config fits (128 x 256 over 256 threads = 128 registers).
  ops::Config d = gemm.default_config(gemm_problem(), "sm_90a");
  Candidate k = estimate(gemm, gemm_problem(), TargetLimits::for_arch("sm_90a"), d);
  EXPECT_EQ(k.acc_regs, 128);
  EXPECT_EQ(k.category, "") << k.reason;
}

// ptxas compiles each thread to 64K / block threads registers; on sm_90a a TMA kernel's block has
// a 128-thread producer on top of `threads`. D=256 with three consumer warpgroups (512 threads,
// 128 registers) failed with "insufficient registers" on the H200 (run s14); it is pruned now,
// while the 128x64 D=256 default (384 threads, 168) stays.
TEST(ConfigSpace, AccumulatorOverTheBlocksRegisterShareIsPruned) {
  const auto& att = ops::find_operator("attention");
  const auto h = TargetLimits::for_arch("sm_90a");
  ops::Config three{{"bm", 192}, {"bn", 32}, {"stages", 2}, {"threads", 384}};
  Candidate r = estimate(att, attention_problem(256), h, three);
  EXPECT_EQ(r.category, "regs");
  EXPECT_NE(r.reason.find("144 registers per thread > 128, the share of the register file for "
                          "512 threads per block"),
            std::string::npos)
      << r.reason;
  ops::Config dflt = att.default_config(attention_problem(256), "sm_90a");
  EXPECT_EQ(estimate(att, attention_problem(256), h, dflt).category, "") << ops::config_str(dflt);
  // A GEMM of 384 threads with 144 accumulator registers: over the 128 of a TMA block (512
  // threads), within the 168 of a block without TMA (rows of K=7 bf16 are not 16-byte multiples,
  // so there is no producer warpgroup).
  const auto& gemm = ops::find_operator("gemm");
  ops::Config g{{"bm", 192}, {"bn", 288}, {"bk", 64}, {"stages", 2}, {"threads", 384}};
  // wgmma has no N=288, so the compiler plans mma with twelve warps, the accumulator in
  // registers under a TMA producer warpgroup: the 512-thread block's share is too small.
  Candidate tma = estimate(gemm, gemm_problem(), h, g);
  EXPECT_EQ(tma.category, "regs") << tma.reason;
  EXPECT_NE(tma.reason.find("for 512 threads per block"), std::string::npos) << tma.reason;
  // K=7: rows of 14 bytes, so the variant without TMA launches (no producer, 384 threads).
  Candidate odd = estimate(gemm, gemm_problem(4096, 4096, 7), h, g);
  EXPECT_NE(odd.category, "regs") << odd.reason;
}

TEST(ConfigSpace, DivisibilityOverWarpgroupsAndWarps) {
  const auto& gemm = ops::find_operator("gemm");
  auto cfg = [](int64_t bm, int64_t bn, int64_t threads) {
    return ops::Config{{"bm", bm}, {"bn", bn}, {"bk", 64}, {"stages", 2}, {"threads", threads}};
  };
  auto h = TargetLimits::for_arch("sm_90a");
  Candidate a = estimate(gemm, gemm_problem(), h, cfg(128, 192, 384));
  EXPECT_EQ(a.category, "divisibility");
  EXPECT_NE(a.reason.find("2 64-row slab(s) for 3 warpgroups"), std::string::npos) << a.reason;
  EXPECT_EQ(estimate(gemm, gemm_problem(), h, cfg(192, 128, 384)).category, "");
  Candidate b = estimate(gemm, gemm_problem(), h, cfg(32, 128, 128));
  EXPECT_NE(b.reason.find("bm=32 is not a multiple of 64"), std::string::npos) << b.reason;
  Candidate w = estimate(gemm, gemm_problem(), h, cfg(128, 128, 160));
  EXPECT_NE(w.reason.find("not whole warpgroups"), std::string::npos) << w.reason;
  // Attention rows own their softmax: 64-row slabs per warpgroup.
  const auto& att = ops::find_operator("attention");
  ops::Config ac{{"bm", 64}, {"bn", 64}, {"stages", 2}, {"threads", 256}};
  Candidate at = estimate(att, attention_problem(128), h, ac);
  EXPECT_EQ(at.category, "divisibility");
  EXPECT_NE(at.reason.find("1 64-row slab(s) for 2 warpgroups"), std::string::npos) << at.reason;
  // sm_80: mma.sync m16n8 tiles over warps.
  Candidate s8 = estimate(att, attention_problem(64), TargetLimits::for_arch("sm_80"),
                          {{"bm", 64}, {"bn", 64}, {"stages", 1}, {"threads", 384}});
  EXPECT_EQ(s8.category, "divisibility") << s8.reason;
}

TEST(ConfigSpace, OperatorValidationFailuresArePrunedAsInvalid) {
  const auto& gemm = ops::find_operator("gemm");
  ops::Config c{{"bm", 128}, {"bn", 128}, {"bk", 64}, {"stages", 9}, {"threads", 256}};
  Candidate r = estimate(gemm, gemm_problem(), TargetLimits::for_arch("sm_90a"), c);
  EXPECT_EQ(r.category, "invalid");
  EXPECT_NE(r.reason.find("stages takes [1, 8]"), std::string::npos) << r.reason;
}

TEST(ConfigSpace, DefaultConfigFirstThenShapeAwareOrder) {
  const auto& gemm = ops::find_operator("gemm");
  ops::Problem decode = gemm_problem(1, 4096, 4096);
  ConfigSpace s =
      enumerate(gemm, decode, TargetLimits::for_arch("sm_90a"), knob_space(gemm, "sm_90a"));
  ASSERT_FALSE(s.kept.empty());
  EXPECT_TRUE(
      is_default_config(s.kept[0].config, gemm.default_config(decode, "sm_90a"), s.neutral));
  // M=1: bm=256 is kept (never pruned by shape) but tried after bm=64.
  size_t first64 = s.kept.size(), first256 = s.kept.size();
  for (size_t i = 1; i < s.kept.size(); ++i) {
    int64_t bm = s.kept[i].config.at("bm");
    if (bm == 64 && first64 == s.kept.size()) first64 = i;
    if (bm == 256 && first256 == s.kept.size()) first256 = i;
  }
  ASSERT_LT(first256, s.kept.size());
  EXPECT_LT(first64, first256);
}

TEST(ConfigSpace, RestrictSpaceReplacesValuesAndNamesBadInput) {
  auto ks = restrict_space(knob_space(ops::find_operator("gemm"), "sm_90a"), "bm=64|128,stages=3");
  EXPECT_EQ(values(ks, "bm"), (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(values(ks, "stages"), (std::vector<int64_t>{3}));
  EXPECT_EQ(
      error_of([&] { restrict_space(ks, "tile=64"); }),
      "--space: unknown knob 'tile'; knobs are bm, bn, bk, stages, threads, swizzle, cluster, "
      "persistent, splits, gemv, swap_ab, pad_k");
  EXPECT_NE(error_of([&] {
              restrict_space(ks, "bm=64|x");
            }).find("'x' is not a non-negative integer; write e.g. bm=64|128"),
            std::string::npos);
}

TEST(ConfigSpace, SpillsAreRejectedAfterCompiling) {
  rt::ResourceUsage ok;
  ok.registers = 168;
  EXPECT_EQ(post_compile_reject(ok), "");
  rt::ResourceUsage spill = ok;
  spill.spill_store_bytes = 64;
  spill.spill_load_bytes = 32;
  EXPECT_EQ(post_compile_reject(spill),
            "ptxas spills 64 bytes stored / 32 bytes loaded at 168 registers; spilling kernels "
            "are not measured");
}

TEST(ConfigSpace, UnknownArchAndDeviceLimits) {
  EXPECT_EQ(error_of([] { TargetLimits::for_arch("cpu"); }),
            "tune: arch 'cpu' has no resource model; use sm_90a or sm_80");
  rt::DeviceInfo d;
  d.arch = "sm_90a";
  d.sm_count = 114;
  d.max_shared_per_block_optin = 200 * 1024;
  TargetLimits t = TargetLimits::for_device(d);
  EXPECT_EQ(t.sm_count, 114);
  EXPECT_EQ(t.max_smem_bytes, 200 * 1024);
}

TEST(ConfigSpace, AKnobTheShapeDecidesTakesTheDefaultsValueUnlessNamed) {
  // gemm's pad_k (Knob::from_default): 1 at a K that leaves rows unaligned, 0 elsewhere, in
  // every candidate; --space pad_k=0|1 searches it like any knob.
  const auto& gemm = ops::find_operator("gemm");
  const TargetLimits t = TargetLimits::for_arch("sm_90a");
  const auto knobs = restrict_space(knob_space(gemm, "sm_90a"), "bm=128,bn=128|256,stages=4");
  for (const auto& [K, pad] : std::vector<std::pair<int64_t, int64_t>>{{2047, 1}, {2048, 0}}) {
    ConfigSpace s = enumerate(gemm, gemm_problem(2048, 2048, K), t, knobs);
    ASSERT_FALSE(s.kept.empty());
    for (const Candidate& c : s.kept)
      EXPECT_EQ(c.config.count("pad_k") ? c.config.at("pad_k") : 0, pad)
          << "K=" << K << " " << ops::config_str(c.config);
  }
  ConfigSpace named =
      enumerate(gemm, gemm_problem(2048, 2048, 2047), t, restrict_space(knobs, "pad_k=0|1"));
  std::set<int64_t> seen;
  for (const Candidate& c : named.kept)
    seen.insert(c.config.at("pad_k"));
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1}));
}
