// decode_attention's split-KV kernels on the CPU interpreter: split then combine agrees with
// the operator's fp64 reference on every element (contiguous and paged caches, per-sequence
// lengths with empty and one-key sequences, Sq = 1 and 4, grouped heads 4 and 1, several
// query-head tiles, D = 64 and 128, odd L, 1, 3 and 7 splits and more splits than key blocks);
// a token that sees no key gives exactly 0; one split gives the single kernel's output bit for
// bit; an empty split writes lse -inf and a zero partial; the lse is the fp64 log-sum-exp;
// choose_splits fills the SMs (one wave) with even, non-empty splits of a few key blocks; bad
// splits and SM counts are rejected with a message naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ops/Check.h"
#include "ops/decode_attention/DecodeAttention.h"
#include "ops/decode_attention/SplitKv.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;
namespace da = tp::ops::decode_attention;

namespace {

const Operator& op() {
  return find_operator("decode_attention");
}

Problem problem(const std::string& shape, DType dt = DType::bf16) {
  return op().parse(parse_kv(shape, "--shape"), dt);
}

Config with_splits(const Problem& p, int64_t splits, Config c = {}) {
  if (c.empty()) c = da::default_config(p, "cpu");
  c["splits"] = splits;
  return c;
}

/// The operator's args (out last) and the intermediates; runs split then combine into out.
struct SplitRun {
  std::vector<HostTensor> args, parts; // parts: o_part, lse_part
};

SplitRun run_split_kv(const Problem& p, const Config& c, uint64_t seed) {
  SplitRun r{da::make_args(p, seed), {}};
  for (const ArgSpec& s : da::split_intermediates(p, c)) {
    r.parts.emplace_back(s.dtype, s.shape);
    r.parts.back().poison();
  }
  std::vector<HostArg> split_args;
  for (int i = 0; i < da::out_index(p); ++i)
    split_args.emplace_back(&r.args[i]);
  split_args.emplace_back(&r.parts[0]);
  split_args.emplace_back(&r.parts[1]);
  interpret(da::build_split(p, c), split_args);
  interpret(da::build_combine(p, c), {&r.parts[0], &r.parts[1], &r.args[da::out_index(p)]});
  return r;
}

struct Case {
  std::string shape;
  int64_t splits;
  Config config; // empty: the interpreter's default
  DType dtype = DType::bf16;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape << " splits=" << c.splits << " " << config_str(c.config);
}

std::vector<Case> cases() {
  const Config bm16 = {{"bm", 16}, {"bn", 32}, {"stages", 2}, {"threads", 128}};
  std::vector<Case> out;
  for (int64_t s : {1, 3, 7}) {
    out.push_back({"B=3,H=8,Hkv=2,D=64,L=333,lens=333:0:1", s, {}});
    out.push_back({"B=3,H=8,Hkv=2,D=64,L=333,paged=1,block=16,lens=333:0:1", s, {}});
    out.push_back({"B=3,H=8,Hkv=2,D=128,L=333,Sq=4,lens=1:333:0", s, {}});
  }
  for (int64_t s : {3, 7}) {
    out.push_back({"B=2,H=8,Hkv=2,D=128,L=1001", s, {}});
    out.push_back({"B=2,H=4,Hkv=4,D=128,L=1001,paged=1,block=64,lens=1001:500", s, {}}); // G=1
    out.push_back({"B=2,H=2,Hkv=2,D=64,L=333,Sq=4", s, {}, DType::f16});                 // G=1
    out.push_back({"B=2,H=8,Hkv=2,D=64,L=1001,Sq=4,paged=1,block=64,lens=1001:77", s, {}});
  }
  // Several query-head tiles per KV head: 32 heads over two 16-row tiles; 7 heads of 3 tokens
  // as five, then two.
  out.push_back({"B=2,H=32,Hkv=1,D=64,L=333", 3, bm16});
  out.push_back({"B=2,H=14,Hkv=2,D=64,L=333,Sq=3", 7, bm16});
  // More splits than key blocks: 1 block of 64 keys, 3 pages of 16, lengths 40 and 17.
  out.push_back({"B=2,H=8,Hkv=2,D=64,L=40,lens=40:17", 7, {}});
  out.push_back({"B=2,H=8,Hkv=2,D=64,L=40,paged=1,block=16,lens=40:17", 7, {}});
  out.push_back({"B=2,H=8,Hkv=2,D=128,L=40,Sq=4,paged=1,block=16,lens=40:1", da::kMaxSplits, {}});
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_s" + std::to_string(i.param.splits) +
                  config_str(i.param.config) + dtype_name(i.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class DecodeAttentionSplitKv : public testing::TestWithParam<Case> {};

TEST_P(DecodeAttentionSplitKv, SplitThenCombineAgreesWithFp64ReferenceOnEveryElement) {
  const Case& k = GetParam();
  Problem p = problem(k.shape, k.dtype);
  Config c = with_splits(p, k.splits, k.config);
  SplitRun r = run_split_kv(p, c, 3);
  auto [atol, rtol] = default_tolerance(op(), p);
  const int64_t B = p.at("B"), H = p.at("H"), Sq = p.at("Sq"), D = p.at("D");
  const std::vector<int64_t> lens = da::lengths(p);
  const HostTensor& out = r.args[da::out_index(p)];
  int64_t bad = 0, nonzero_blind = 0, i = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> want = da::reference(p, r.args, b, 0, H, 0, Sq, 0, D);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < Sq; ++t)
        for (int64_t d = 0; d < D; ++d, ++i) {
          const double got = out.get(i), ref = want[static_cast<size_t>((h * Sq + t) * D + d)];
          bad += !(std::fabs(got - ref) <= atol + rtol * std::fabs(ref));
          // A token that sees no key (an empty sequence, the first of Sq over one key) is 0.
          if (lens[b] - Sq + t + 1 <= 0) nonzero_blind += got != 0.0;
        }
  }
  EXPECT_EQ(bad, 0) << "elements outside atol=" << atol << " rtol=" << rtol;
  EXPECT_EQ(nonzero_blind, 0) << "outputs of tokens that see no key";
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionSplitKv, testing::ValuesIn(cases()), case_name);

TEST(DecodeAttentionSplitKvOne, OneSplitGivesTheSingleKernelsOutputBitForBit) {
  // With one split the combine's weight is exp(0) = 1 and its total 1: out is the partial,
  // which is the single kernel's normalised output before it rounds to bf16.
  for (std::string shape : {"B=3,H=8,Hkv=2,D=64,L=333,Sq=4,lens=333:0:1",
                            "B=2,H=8,Hkv=2,D=128,L=100,paged=1,block=16,lens=100:33"}) {
    Problem p = problem(shape);
    Config c = with_splits(p, 1);
    SplitRun r = run_split_kv(p, c, 8);
    std::vector<HostTensor> a = da::make_args(p, 8);
    std::vector<HostArg> args(a.begin(), a.end());
    interpret(da::build(p, c), args);
    const HostTensor &single = a[da::out_index(p)], &split = r.args[da::out_index(p)];
    int64_t differ = 0;
    for (int64_t i = 0; i < single.numel(); ++i)
      differ += !(single.get(i) == split.get(i));
    EXPECT_EQ(differ, 0) << shape;
  }
}

TEST(DecodeAttentionSplitKvParts, AnEmptySplitHasLseMinusInfinityAndAZeroPartial) {
  // Sequence 0 has 40 keys (3 pages of 16: splits 0..2), sequence 1 none (every split empty).
  Problem p = problem("B=2,H=8,Hkv=2,D=64,L=40,paged=1,block=16,lens=40:0");
  const int64_t ns = 5, H = 8, D = 64;
  SplitRun r = run_split_kv(p, with_splits(p, ns), 2);
  const HostTensor &o = r.parts[0], &lse = r.parts[1];
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t z = 0; z < ns; ++z) {
        const int64_t row = (b * H + h) * ns + z;
        const bool empty = b == 1 || z >= 3;
        if (empty) {
          EXPECT_EQ(lse.get(row), -INFINITY) << "b=" << b << " h=" << h << " split " << z;
        } else {
          EXPECT_TRUE(std::isfinite(lse.get(row))) << "b=" << b << " h=" << h << " split " << z;
        }
        int64_t nonzero = 0;
        for (int64_t d = 0; d < D; ++d)
          nonzero += o.get(row * D + d) != 0.0;
        if (empty)
          EXPECT_EQ(nonzero, 0) << "b=" << b << " h=" << h << " split " << z;
        else
          EXPECT_GT(nonzero, 0) << "b=" << b << " h=" << h << " split " << z;
      }
}

TEST(DecodeAttentionSplitKvParts, LseIsTheNaturalLogSumExpOfTheScaledScores) {
  // One split sees every key, so its lse is log sum_j exp(q.k_j / sqrt(D)) over the keys the
  // token sees (contiguous cache, fp64 here).
  Problem p = problem("B=2,H=8,Hkv=2,D=64,L=77,Sq=2,lens=77:1");
  SplitRun r = run_split_kv(p, with_splits(p, 1), 4);
  const int64_t H = 8, Hkv = 2, Sq = 2, D = 64, L = 77, G = H / Hkv;
  const HostTensor &q = r.args[0], &k = r.args[1], &lse = r.parts[1];
  const std::vector<int64_t> lens = da::lengths(p);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < Sq; ++t) {
        const int64_t visible = lens[b] - Sq + t + 1;
        double mx = -INFINITY, sum = 0;
        std::vector<double> s(static_cast<size_t>(std::max<int64_t>(visible, 0)));
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e)
            dot +=
                q.get(((b * H + h) * Sq + t) * D + e) * k.get(((b * Hkv + h / G) * L + j) * D + e);
          s[j] = dot / std::sqrt(double(D));
          mx = std::max(mx, s[j]);
        }
        for (double x : s)
          sum += std::exp(x - mx);
        const double want = visible > 0 ? mx + std::log(sum) : -INFINITY;
        const double got = lse.get((b * H + h) * Sq + t);
        if (visible > 0)
          EXPECT_NEAR(got, want, 1e-4) << "b=" << b << " h=" << h << " t=" << t;
        else
          EXPECT_EQ(got, -INFINITY) << "b=" << b << " h=" << h << " t=" << t;
      }
}

struct Fill {
  std::string shape;
  int sm_count;
};

class DecodeAttentionChooseSplits : public testing::TestWithParam<Fill> {};

TEST_P(DecodeAttentionChooseSplits, FillsTheSmsWithEvenSplitsOfAFewKeyBlocks) {
  Problem p = problem(GetParam().shape);
  const int sm = GetParam().sm_count;
  Config c = da::default_config(p, "sm_90a");
  const int64_t s = da::choose_splits(p, c, sm);
  const int64_t G = p.at("H") / p.at("Hkv");
  const int64_t blocks =
      p.at("B") * p.at("Hkv") * ((G + da::heads_per_tile(p, c) - 1) / da::heads_per_tile(p, c));
  const int64_t nb = (p.at("L") + c.at("bn") - 1) / c.at("bn"), per = (nb + s - 1) / s;
  ASSERT_GE(s, 1);
  EXPECT_LE(s, da::kMaxSplits);
  EXPECT_NO_THROW(da::splits_of(with_splits(p, s, c)));
  if (4 * blocks >= 3 * sm) {
    EXPECT_EQ(s, 1) << "a grid that fills 3/4 of the SMs is not split";
    return;
  }
  EXPECT_TRUE(s == 1 || per >= 4) << "a split takes at least 4 key blocks, got " << per;
  EXPECT_GT(nb, per * (s - 1)) << "the last split of a full-length sequence is not empty";
  // Either one more split would start a second wave of blocks, or a cap stopped it: four key
  // blocks per split, or kMaxSplits.
  const bool capped = (s + 1) * 4 > nb || s == da::kMaxSplits;
  EXPECT_TRUE(capped || blocks * (s + 1) > sm)
      << "splits=" << s << " gives " << blocks * s << " blocks on " << sm << " SMs";
  // And never more blocks than SMs.
  EXPECT_LE(blocks * s, sm) << "splits=" << s << " over-fills " << sm << " SMs";
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionChooseSplits,
                         testing::Values(Fill{"B=1,H=32,Hkv=8,D=128,L=8192", 132},
                                         Fill{"B=1,H=32,Hkv=8,D=128,L=131072", 132},
                                         Fill{"B=1,H=32,Hkv=8,D=128,L=8192,paged=1,block=16", 132},
                                         Fill{"B=1,H=32,Hkv=8,D=128,L=8192,paged=1,block=64", 132},
                                         Fill{"B=4,H=32,Hkv=8,D=128,L=4096", 132},
                                         Fill{"B=16,H=32,Hkv=8,D=128,L=4096", 132},
                                         Fill{"B=64,H=32,Hkv=8,D=128,L=4096", 132},
                                         Fill{"B=1,H=32,Hkv=8,D=128,L=100", 132},
                                         Fill{"B=1,H=8,Hkv=1,D=64,L=1048576", 1000},
                                         Fill{"B=2,H=64,Hkv=1,D=64,L=3000,Sq=8", 108}),
                         [](const testing::TestParamInfo<Fill>& i) {
                           std::string n = i.param.shape + "_sm" + std::to_string(i.param.sm_count);
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(DecodeAttentionChooseSplitsRule, SmallBatchesAtLongCachesAreSplitAndBigOnesAreNot) {
  // The cases issue 16 is about: B=1 on Llama-3-8B is 8 blocks; B=16 is 128.
  Problem one = problem("B=1,H=32,Hkv=8,D=128,L=131072");
  Problem sixteen = problem("B=16,H=32,Hkv=8,D=128,L=131072");
  EXPECT_GE(da::choose_splits(one, da::default_config(one, "sm_90a"), 132) * 8, 132 * 3 / 4);
  EXPECT_EQ(da::choose_splits(sixteen, da::default_config(sixteen, "sm_90a"), 132), 1);
  // A short cache is not cut into splits of fewer than four key blocks.
  Problem shorter = problem("B=1,H=32,Hkv=8,D=128,L=300");
  EXPECT_EQ(da::choose_splits(shorter, da::default_config(shorter, "sm_90a"), 132), 1);
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(DecodeAttentionSplitKvErrors, BadSplitsAndSmCountsAreRejectedNamingThem) {
  Problem p = problem("B=1,H=32,Hkv=8,D=128,L=8192");
  Config c = da::default_config(p, "sm_90a");
  expect_error([&] { da::build_split(p, c); }, "need splits= in the config");
  expect_error([&] { da::build_combine(p, with_splits(p, 0, c)); }, "splits=0 is outside 1..64");
  expect_error([&] { da::split_intermediates(p, with_splits(p, 65, c)); },
               "splits=65 is outside 1..64");
  expect_error([&] { da::choose_splits(p, c, 0); }, "SM count (>= 1), got 0");
  Problem paged = problem("B=1,H=32,Hkv=8,D=128,L=8192,paged=1,block=16");
  Config wrong = with_splits(paged, 4, da::default_config(p, "sm_90a")); // bn=64
  expect_error([&] { da::build_split(paged, wrong); }, "bn=64 must equal the page size block=16");
}

} // namespace
