// decode_attention on the CPU, through the registered Operator: check() agrees with the fp64
// reference at odd shapes (L = 1, 77, 1000; per-sequence lengths with an empty sequence; paged
// caches of 16- and 64-key pages with shuffled block tables; grouped heads 32/8 and 14/2, one
// KV head for 32; Sq = 1, 3 and 4; query rows over several tiles); an empty sequence's output
// is exactly 0; a paged cache gives bit for bit the contiguous cache's output; the block table
// is a seeded shuffle of every page; the problem comes back from its tensors' shapes; default
// configs are within the knobs on every arch; bad keys, tensors and configs are rejected with a
// message naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ir/IR.h"
#include "ops/Check.h"
#include "ops/decode_attention/DecodeAttention.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;

namespace {

const Operator& op() {
  return find_operator("decode_attention");
}

Problem problem(const std::string& shape, DType dt = DType::bf16) {
  return op().parse(parse_kv(shape, "--shape"), dt);
}

struct Case {
  std::string shape;
  DType dtype;
  Config config; // empty: the interpreter's default
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape << " " << dtype_name(c.dtype) << " " << config_str(c.config);
}

std::vector<Case> cases() {
  const DType b = DType::bf16, h = DType::f16;
  return {
      {"B=2,H=8,Hkv=2,D=64,L=1", b, {}},
      {"B=1,H=8,Hkv=2,D=64,L=1,Sq=4", b, {}}, // three of four tokens see no key
      {"B=2,H=32,Hkv=8,D=128,L=77", b, {}},
      {"B=1,H=32,Hkv=8,D=128,L=1000", b, {}},
      {"B=3,H=32,Hkv=8,D=128,L=100,lens=0:100:37", b, {}},
      {"B=2,H=32,Hkv=8,D=128,L=77,Sq=4,lens=77:5", b, {}},
      {"B=3,H=14,Hkv=2,D=64,L=77,Sq=3", h, {}},
      {"B=3,H=32,Hkv=8,D=128,L=77,paged=1,block=16,lens=77:0:33", b, {}},
      {"B=2,H=8,Hkv=2,D=64,L=1000,paged=1,block=64,lens=1000:999", h, {}},
      {"B=2,H=32,Hkv=8,D=128,L=50,Sq=4,paged=1,block=16,pages=11", b, {}},
      // G Sq = 32 rows over two 16-row tiles; then one 64-row tile with bn = 32.
      {"B=2,H=32,Hkv=1,D=64,L=77", b, {{"bm", 16}, {"bn", 64}, {"stages", 2}, {"threads", 128}}},
      {"B=2,H=8,Hkv=2,D=64,L=77,Sq=4",
       b,
       {{"bm", 64}, {"bn", 32}, {"stages", 3}, {"threads", 128}}},
      // Seven heads of three tokens over 16-row tiles: five heads, then two.
      {"B=2,H=14,Hkv=2,D=64,L=77,Sq=3",
       b,
       {{"bm", 16}, {"bn", 32}, {"stages", 2}, {"threads", 128}}},
      {"B=1,H=8,Hkv=1,D=64,L=40,Sq=4", b, {{"bm", 16}, {"bn", 32}, {"stages", 1}, {"threads", 64}}},
  };
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_" + dtype_name(i.param.dtype) + config_str(i.param.config);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class DecodeAttentionCpu : public testing::TestWithParam<Case> {};

TEST_P(DecodeAttentionCpu, CheckAgreesWithFp64ReferenceOnEveryElement) {
  Problem p = problem(GetParam().shape, GetParam().dtype);
  CheckOptions o;
  o.seed = 5;
  o.config = GetParam().config;
  CheckResult r = check(op(), p, o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_EQ(r.blocks_run, r.blocks_total) << "small cases run every block";
  EXPECT_EQ(r.nonfinite, 0);
  const std::vector<int64_t> out = op().arg_specs(p)[op().outputs(p)[0]].shape;
  EXPECT_EQ(r.checked, out[0] * out[1] * out[2] * out[3]) << "the blocks' boxes cover out";
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionCpu, testing::ValuesIn(cases()), case_name);

std::vector<HostArg> host_args(std::vector<HostTensor>& a) {
  std::vector<HostArg> out;
  for (HostTensor& t : a)
    out.emplace_back(&t);
  return out;
}

TEST(DecodeAttention, AnEmptySequenceGivesZerosAndOthersDoNot) {
  Problem p = problem("B=3,H=8,Hkv=2,D=64,L=40,Sq=2,lens=0:40:1");
  std::vector<HostTensor> a = op().make_args(p, 9);
  interpret(op().build(p, op().default_config(p, "cpu")), host_args(a));
  const HostTensor& out = a[op().outputs(p)[0]];
  const int64_t per_seq = 8 * 2 * 64;
  int64_t nonzero = 0;
  for (int64_t i = 0; i < per_seq; ++i)
    EXPECT_EQ(out.get(i), 0.0) << "sequence 0 has no keys, element " << i;
  for (int64_t i = per_seq; i < 3 * per_seq; ++i)
    nonzero += out.get(i) != 0.0;
  EXPECT_GT(nonzero, per_seq); // the other two are attention outputs
  // len = 1 with Sq = 2: token 0 sees no key (0), token 1 sees key 0 (that key's v).
  for (int64_t d = 0; d < 64; ++d)
    EXPECT_EQ(out.get(2 * per_seq + d), 0.0) << "token 0 of sequence 2, d=" << d;
}

TEST(DecodeAttention, PagedCacheGivesTheContiguousCachesOutputBitForBit) {
  // The paged problem's pages hold the contiguous cache's keys in block-table order; with one
  // page per step both kernels add the same terms in the same order.
  Problem pp = problem("B=3,H=8,Hkv=2,D=64,L=77,Sq=2,paged=1,block=16,lens=77:20:50");
  Problem pc = problem("B=3,H=8,Hkv=2,D=64,L=77,Sq=2,lens=77:20:50");
  std::vector<HostTensor> ap = op().make_args(pp, 4), ac = op().make_args(pc, 4);
  const int64_t Hkv = 2, blk = 16, D = 64, L = 77, MB = decode_attention::pages_per_seq(pp);
  for (int64_t i = 0; i < ap[0].numel(); ++i)
    ac[0].set(i, ap[0].get(i));
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t hk = 0; hk < Hkv; ++hk)
      for (int64_t j = 0; j < L; ++j) {
        const int64_t page = static_cast<int64_t>(ap[3].get(b * MB + j / blk));
        for (int64_t d = 0; d < D; ++d) {
          const int64_t src = ((page * Hkv + hk) * blk + j % blk) * D + d;
          const int64_t dst = ((b * Hkv + hk) * L + j) * D + d;
          ac[1].set(dst, ap[1].get(src));
          ac[2].set(dst, ap[2].get(src));
        }
      }
  Config c = op().default_config(pp, "cpu");
  interpret(op().build(pp, c), host_args(ap));
  interpret(op().build(pc, c), host_args(ac));
  const HostTensor &op_ = ap[op().outputs(pp)[0]], &oc = ac[op().outputs(pc)[0]];
  ASSERT_EQ(op_.numel(), oc.numel());
  int64_t differ = 0;
  for (int64_t i = 0; i < oc.numel(); ++i)
    differ += !(op_.get(i) == oc.get(i));
  EXPECT_EQ(differ, 0);
}

TEST(DecodeAttention, BlockTableIsASeededShuffleOfEveryPage) {
  Problem p = problem("B=4,H=8,Hkv=2,D=64,L=100,paged=1,block=16");
  std::vector<HostTensor> a = op().make_args(p, 1), again = op().make_args(p, 1);
  std::vector<HostTensor> other = op().make_args(p, 2);
  const int64_t n = a[3].numel();
  ASSERT_EQ(n, 4 * 7);
  ASSERT_EQ(a[1].shape(), (std::vector<int64_t>{28, 2, 16, 64}));
  std::vector<int64_t> pages;
  int64_t in_order = 0, same = 0, differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    pages.push_back(static_cast<int64_t>(a[3].get(i)));
    in_order += pages.back() == i;
    same += a[3].get(i) == again[3].get(i);
    differ += a[3].get(i) != other[3].get(i);
  }
  std::sort(pages.begin(), pages.end());
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(pages[i], i) << "every page once";
  EXPECT_LT(in_order, n / 2) << "the pages are not laid out in order";
  EXPECT_EQ(same, n) << "the same seed gives the same table";
  EXPECT_GT(differ, 0) << "another seed gives another table";
  // Without lens= every sequence is L long.
  for (int64_t b = 0; b < 4; ++b)
    EXPECT_EQ(a[4].get(b), 100.0);
}

TEST(DecodeAttention, LongCachesAreSampledOnTheInterpreter) {
  CheckOptions o;
  o.flop_budget = 3e6;
  CheckResult r = check(op(), problem("B=4,H=32,Hkv=8,D=128,L=4096,paged=1,block=64"), o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_LT(r.blocks_run, r.blocks_total);
  EXPECT_GT(r.checked, 0);
}

TEST(DecodeAttention, ProblemComesBackFromTheTensorsShapes) {
  for (std::string shape :
       {"B=2,H=32,Hkv=8,D=128,L=77", "B=3,H=32,Hkv=8,D=128,L=100,Sq=4,lens=0:100:37",
        "B=3,H=8,Hkv=2,D=64,L=77,paged=1,block=16,lens=77:0:33",
        "B=2,H=8,Hkv=2,D=64,L=50,paged=1,block=16,pages=9"}) {
    Problem p = problem(shape);
    std::vector<ArgSpec> specs = op().arg_specs(p);
    std::vector<std::vector<int64_t>> shapes, in_shapes;
    std::vector<DType> dtypes, in_dtypes;
    for (size_t i = 0; i < specs.size(); ++i) {
      shapes.push_back(specs[i].shape);
      dtypes.push_back(specs[i].dtype);
      if (static_cast<int>(i) != op().outputs(p)[0]) {
        in_shapes.push_back(specs[i].shape);
        in_dtypes.push_back(specs[i].dtype);
      }
    }
    Problem want = op().tuning_problem(p);
    EXPECT_EQ(op().problem_for(shapes, dtypes, {}).shape_str(), want.shape_str()) << shape;
    EXPECT_EQ(op().problem_from_inputs(in_shapes, in_dtypes, {}).shape_str(), want.shape_str())
        << shape;
    // What comes back builds the same kernel.
    Config c = op().default_config(p, "sm_90a");
    EXPECT_EQ(op().build(want, c)->name, op().build(p, c)->name) << shape;
  }
}

TEST(DecodeAttention, DefaultConfigsAreWithinTheKnobsOnEveryArch) {
  for (std::string shape : {"B=64,H=32,Hkv=8,D=128,L=32768", "B=1,H=32,Hkv=8,D=128,L=131072",
                            "B=4,H=32,Hkv=8,D=128,L=4096,paged=1,block=16",
                            "B=2,H=64,Hkv=1,D=64,"
                            "L=9,Sq=7"}) {
    Problem p = problem(shape);
    for (std::string arch : {"cpu", "sm_80", "sm_90a"}) {
      Config c = op().default_config(p, arch);
      EXPECT_NO_THROW(validate_knobs(op(), c, arch)) << arch << " " << config_str(c);
      EXPECT_NO_THROW(op().validate(p, c)) << arch << " " << config_str(c) << " " << shape;
    }
  }
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(DecodeAttention, BadProblemsAreRejectedNamingTheKey) {
  expect_error([] { problem("B=2,H=32,Hkv=5,D=128,L=7"); }, "Hkv=5 does not divide H=32");
  expect_error([] { problem("B=2,H=32,D=128,L=7,Sq=9"); }, "Sq=9 query tokens");
  expect_error([] { problem("B=2,H=32,D=96,L=7"); }, "D=96 is not supported");
  expect_error([] { problem("B=2,H=32,D=64"); }, "missing L");
  expect_error([] { problem("B=2,H=32,D=64,L=7,lens=3:8"); }, "lens entry '8'");
  expect_error([] { problem("B=2,H=32,D=64,L=7,lens=3"); }, "lens has 1 entries but B=2");
  expect_error([] { problem("B=2,H=32,D=64,L=7,block=16"); }, "block= describes a paged cache");
  expect_error([] { problem("B=2,H=32,D=64,L=7,paged=1,block=24"); }, "block=24");
  expect_error([] { problem("B=2,H=32,D=64,L=70,paged=1,block=16,pages=9"); },
               "pages=9 is fewer than B x ceil(L / block) = 10");
  expect_error([] { problem("B=2,H=32,D=64,L=7", DType::f32); }, "dtype f32");
  expect_error([] { problem("B=2,H=32,D=64,L=7,causal=1"); }, "causal");
}

TEST(DecodeAttention, BadConfigsAreRejectedNamingTheRule) {
  Problem paged = problem("B=2,H=32,Hkv=8,D=64,L=70,paged=1,block=16");
  expect_error(
      [&] {
        op().validate(paged, {{"bm", 64}, {"bn", 64}, {"stages", 2}, {"threads", 128}});
      },
      "bn=64 must equal the page size block=16");
  Problem wide = problem("B=2,H=64,Hkv=1,D=64,L=70,Sq=3");
  expect_error(
      [&] {
        check_config(op(), wide, {{"bm", 64}, {"bn", 64}, {"stages", 2}}, "cpu");
      },
      "missing threads");
  expect_error(
      [&] {
        check_config(op(), wide, {{"bm", 8}, {"bn", 64}, {"stages", 2}, {"threads", 128}}, "cpu");
      },
      "bm=8 is out of range; bm takes a multiple of 16 in [16, 256]");
}

TEST(DecodeAttention, TensorsThatDoNotFitAreNamed) {
  const DType b = DType::bf16, i = DType::i32;
  const std::vector<int64_t> q = {2, 8, 1, 64}, k = {2, 2, 77, 64};
  expect_error([&] { op().problem_for({q, k, k}, {b, b, b}, {}); }, "got 3");
  expect_error(
      [&] {
        op().problem_for({q, {2, 2, 77, 32}, k, q}, {b, b, b, b}, {});
      },
      "tensor 'k' must be [B=2, Hkv, L, D=64]");
  expect_error(
      [&] {
        op().problem_for({q, k, {2, 2, 76, 64}, q}, {b, b, b, b}, {});
      },
      "tensor 'v' must have k's shape");
  expect_error(
      [&] {
        op().problem_for({q, k, k, {3}, q}, {b, b, b, i, b}, {});
      },
      "tensor 'lens' must be i32 [B] = [2]");
  expect_error(
      [&] {
        op().problem_for({q, k, k, {2, 8, 1, 32}}, {b, b, b, b}, {});
      },
      "tensor 'out' must have q's shape");
  expect_error(
      [&] {
        op().problem_for({q, k, k, q}, {b, DType::f16, b, b}, {});
      },
      "tensor 1 is f16 but q is bf16");
  const std::vector<int64_t> cache = {10, 2, 16, 64};
  expect_error(
      [&] {
        op().problem_for({q, cache, cache, {2, 5}, {2}, q}, {b, b, b, b, i, b}, {});
      },
      "tensor 'block_table' must be i32 [B=2, max_blocks]");
  expect_error(
      [&] {
        op().problem_for({q, k, k, q}, {b, b, b, b}, {{"paged", "1"}});
      },
      "takes no options");
  Problem pg = op().problem_for({q, cache, cache, {2, 5}, {2}, q}, {b, b, b, i, i, b}, {});
  EXPECT_EQ(pg.at("L"), 80);
  EXPECT_EQ(pg.at("block"), 16);
}

} // namespace
