// w4a16_gemm on the CPU: the interpreter agrees with the fp64 reference at odd shapes (M = 1,
// 3, 77; N not a multiple of the column tile; K = 256 in groups of 128, K = 160 in groups of
// 32, K = 96 in groups of 8) for the CPU default and the GPU arch defaults; the packing is the
// documented one (checked on hand-built words, not through the reference); inputs use every
// code and build no dense weights; the default configs are decode- or prefill-shaped and valid
// on their arch; the operator runs through check and dispatch; bad shapes, groups, dtypes,
// configs and tensors are rejected with a message naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ops/Check.h"
#include "ops/HostProgram.h"
#include "ops/w4a16_gemm/W4a16Gemm.h"
#include "tilepilot/dispatch.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;

namespace {

Problem problem(int64_t M, int64_t N, int64_t K, int64_t group, DType dt = DType::bf16) {
  return w4a16::parse({{"M", std::to_string(M)},
                       {"N", std::to_string(N)},
                       {"K", std::to_string(K)},
                       {"group", std::to_string(group)}},
                      dt);
}

void run(const Problem& p, const Config& c, std::vector<HostTensor>& a) {
  // The config's program: one kernel, or (splits > 1) the split kernel and gemm's combine.
  interpret_program(checked_program(find_operator("w4a16_gemm"), p, c),
                    {&a[0], &a[1], &a[2], &a[3]});
}

/// The largest |got - want| - (atol + rtol |want|) (> 0: a failure); NaN anywhere fails.
double excess(const HostTensor& got, const std::vector<double>& want, double atol, double rtol) {
  double worst = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.get(static_cast<int64_t>(i));
    if (!std::isfinite(g)) return INFINITY;
    worst = std::max(worst, std::fabs(g - want[i]) - (atol + rtol * std::fabs(want[i])));
  }
  return worst;
}

struct Case {
  int64_t M, N, K, group;
  DType dtype;
  std::string arch; // whose default config runs; "" with `config`
  Config config;
};

class W4a16GemmInterpreter : public testing::TestWithParam<Case> {};

TEST_P(W4a16GemmInterpreter, AgreesWithFp64Reference) {
  const Case& c = GetParam();
  Problem p = problem(c.M, c.N, c.K, c.group, c.dtype);
  std::vector<HostTensor> a = w4a16::make_args(p, 7);
  Config cfg = c.config.empty() ? w4a16::default_config(p, c.arch) : c.config;
  run(p, cfg, a);
  // The weights are rounded into the dtype exactly as the reference rounds them; what is left
  // is C's one rounding (bf16 2^-9, f16 2^-12 relative) and f32 accumulation.
  const double rtol = c.dtype == DType::bf16 ? 4e-3 : 1e-3;
  EXPECT_LE(excess(a[3], w4a16::reference(p, a, 0, c.M, 0, c.N), 1e-4, rtol), 0)
      << p.shape_str() << " " << config_str(cfg);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t M : {1, 3, 77})
    for (int64_t N : {77, 100}) {
      out.push_back({M, N, 256, 128, DType::bf16, "cpu", {}});
      out.push_back({M, N, 160, 32, DType::bf16, "cpu", {}});
    }
  out.push_back({3, 77, 256, 128, DType::f16, "cpu", {}});
  // The GPU defaults' tiles (decode and prefill shaped) on the interpreter.
  for (std::string arch : {"sm_90a", "sm_80"}) {
    out.push_back({1, 77, 256, 128, DType::bf16, arch, {}});
    out.push_back({16, 100, 256, 128, DType::bf16, arch, {}});
    out.push_back({77, 300, 256, 128, DType::bf16, arch, {}});
  }
  // A step over two groups (scale rows from shared memory) with a ragged last step (K = 160
  // over bk = 64), and groups of 8 (one scale row per word row).
  Config c64 = {{"bm", 16}, {"bn", 32}, {"bk", 64}, {"stages", 2}, {"threads", 128}};
  out.push_back({77, 45, 160, 32, DType::bf16, "", c64});
  out.push_back({3, 100, 96, 8, DType::bf16, "", c64});
  out.push_back({1, 50, 96, 8, DType::f16, "", c64});
  // The swapped decode form (weights as the A operand in registers), whole and split over K:
  // splits of 2, 3 and 4 over 5 and 3 K steps (ragged last splits; at 4, the last split has no
  // step and stores zeros), groups of 32 and 8, f16 too.
  Config sw = {{"bm", 16}, {"bn", 64}, {"bk", 32}, {"stages", 2}, {"threads", 128}, {"swap_ab", 1}};
  out.push_back({3, 100, 160, 32, DType::bf16, "", sw});
  for (int64_t s : {2, 3, 4}) {
    Config split = sw;
    split["splits"] = s;
    out.push_back({3, 100, 160, 32, DType::bf16, "", split});
    out.push_back({7, 77, 96, 8, DType::f16, "", split});
  }
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  const Case& c = i.param;
  return "M" + std::to_string(c.M) + "_N" + std::to_string(c.N) + "_K" + std::to_string(c.K) +
         "_g" + std::to_string(c.group) + "_" + dtype_name(c.dtype) + "_" +
         (c.arch.empty() ? "config" : c.arch) + "_" + std::to_string(i.index);
}

INSTANTIATE_TEST_SUITE_P(OddShapes, W4a16GemmInterpreter, testing::ValuesIn(cases()), case_name);

TEST(W4a16Gemm, PackingIsEightCodesPerWordAlongKLowNibbleFirst) {
  // A = identity reads W's dequantized rows out of C exactly (one product per output). Codes
  // c[k, n] = (k + 3n) % 16 packed by hand: row 8r + i of column n in bits 4i..4i+3 of word
  // [r, n]; scales 1 for group 0 and 0.5 for group 1. Expected: (c - 8) * scale, written here.
  const int64_t K = 32, N = 5, group = 16;
  Problem p = problem(K, N, K, group);
  std::vector<HostTensor> a = w4a16::make_args(p, 1);
  a[0].fill(0);
  for (int64_t k = 0; k < K; ++k)
    a[0].set(k * K + k, 1.0);
  auto* words = static_cast<uint32_t*>(a[1].data());
  for (int64_t r = 0; r < K / 8; ++r)
    for (int64_t n = 0; n < N; ++n) {
      uint32_t w = 0;
      for (int i = 0; i < 8; ++i)
        w |= uint32_t((8 * r + i + 3 * n) % 16) << (4 * i);
      words[r * N + n] = w;
    }
  for (int64_t n = 0; n < N; ++n) {
    a[2].set(n, 1.0);
    a[2].set(N + n, 0.5);
  }
  for (const Config& c :
       {w4a16::default_config(p, "cpu"),
        Config{{"bm", 16}, {"bn", 16}, {"bk", 32}, {"stages", 2}, {"threads", 128}}}) {
    a[3].poison();
    run(p, c, a);
    std::vector<double> ref = w4a16::reference(p, a, 0, K, 0, N);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        const double want = double((k + 3 * n) % 16 - 8) * (k < group ? 1.0 : 0.5);
        EXPECT_EQ(a[3].get(k * N + n), want) << "k=" << k << " n=" << n << " " << config_str(c);
        EXPECT_EQ(ref[k * N + n], want) << "reference, k=" << k << " n=" << n;
      }
  }
}

TEST(W4a16Gemm, InputsUseEveryCodeAndNoDenseWeights) {
  // Llama-3-8B's gate_up projection at decode: the arguments are the packed tensors only
  // (A, W, scales, C: about 59 MB), and one block's reference decodes only its columns.
  Problem p = problem(1, 28672, 4096, 128);
  std::vector<HostTensor> a = w4a16::make_args(p, 3);
  size_t bytes = 0;
  for (const HostTensor& t : a)
    bytes += t.bytes();
  EXPECT_LT(bytes, size_t(64) << 20);
  std::vector<int64_t> count(16);
  const auto* words = static_cast<const uint32_t*>(a[1].data());
  for (int64_t i = 0; i < 1 << 16; ++i)
    for (int s = 0; s < 32; s += 4)
      ++count[(words[i] >> s) & 15];
  for (int c = 0; c < 16; ++c)
    EXPECT_NEAR(count[c], (1 << 19) / 16.0, 2000) << "code " << c;
  std::vector<double> ref = w4a16::reference(p, a, 0, 1, 28672 - 64, 64);
  for (double v : ref)
    EXPECT_TRUE(std::isfinite(v));
}

TEST(W4a16Gemm, DefaultConfigsFitTheRegimeAndTheArch) {
  const Operator& op = find_operator("w4a16_gemm");
  for (std::string arch : {"cpu", "sm_80", "sm_90a"})
    for (int64_t M : {1, 16, 77, 2048})
      for (int64_t N : {4096, 28672, 77})
        for (auto [K, group] : {std::pair{4096, 128}, {14336, 128}, {160, 32}, {96, 8}}) {
          Problem p = problem(M, N, K, group);
          Config c = op.default_config(p, arch);
          EXPECT_NO_THROW(validate_knobs(op, c, arch)) << arch << " " << config_str(c);
          EXPECT_NO_THROW(op.validate(p, c)) << arch << " " << config_str(c);
        }
  // Decode spreads N = 4096 over at least 64 blocks; prefill takes tensor-core tiles of 128
  // rows or more (256 on sm_90a: less unpacking per tensor-core step).
  for (std::string arch : {"sm_80", "sm_90a"}) {
    Problem decode = problem(1, 4096, 4096, 128), prefill = problem(2048, 4096, 4096, 128);
    // Blocks of the kernel that streams the weights: column tiles times K splits (the grid of
    // a split program's last step is its combine's).
    const Config dc = op.default_config(decode, arch);
    const int64_t splits = dc.count("splits") ? dc.at("splits") : 1;
    EXPECT_GE((4096 + dc.at("bn") - 1) / dc.at("bn") * splits, 64) << arch;
    EXPECT_GE(op.default_config(prefill, arch).at("bm"), 128) << arch;
  }
}

TEST(W4a16Gemm, RunsThroughCheckAndDispatch) {
  const Operator& op = find_operator("w4a16_gemm");
  CheckResult r = check(op, problem(3, 77, 256, 128), {});
  EXPECT_TRUE(r.passed) << r.first_bad;
  EXPECT_EQ(r.checked, 3 * 77);
  // No release: dispatch runs the host framework (the fp64 reference, rounded once).
  Problem p = problem(5, 40, 64, 32);
  std::vector<HostTensor> a = w4a16::make_args(p, 2);
  std::vector<double> want = w4a16::reference(p, a, 0, 5, 0, 40);
  Dispatcher d;
  d.run("w4a16_gemm", {&a[0], &a[1], &a[2], &a[3]});
  for (int64_t i = 0; i < 5 * 40; ++i)
    EXPECT_EQ(a[3].get(i), round_to(DType::bf16, want[i])) << i;
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(W4a16Gemm, BadInputIsRejectedWithItsName) {
  expect_error([] { problem(1, 64, 250, 128); },
               "K=250 is not a multiple of group=128; every group of K rows has one scale row "
               "(pad K to 256");
  expect_error([] { problem(1, 64, 240, 12); }, "group=12 is not a multiple of 8");
  expect_error([] { problem(1, 64, 272, 136); }, "group=136 has no reduction step");
  expect_error([] { problem(1, 64, 256, 128, DType::f32); }, "dtype f32 is not supported");
  expect_error([] { w4a16::parse({{"M", "1"}, {"K", "256"}}, DType::bf16); }, "missing N");
  expect_error(
      [] {
        w4a16::parse({{"M", "1"}, {"N", "8"}, {"K", "256"}, {"G", "1"}}, DType::bf16);
      },
      "unknown shape key 'G'");
  expect_error([] { problem(1, 64, 256, 0); }, "group");
  const Operator& op = find_operator("w4a16_gemm");
  Problem p = problem(3, 77, 256, 32);
  Config c = {{"bm", 16}, {"bn", 32}, {"bk", 48}, {"stages", 2}, {"threads", 128}};
  expect_error([&] { check_config(op, p, c, "cpu"); }, "bk=48 and group=32 do not nest");
  c["bk"] = 32;
  c["bm"] = 24;
  expect_error([&] { check_config(op, p, c, "cpu"); }, "bm takes a multiple of 16 in [16, 256]");
  c["bm"] = 512;
  expect_error([&] { check_config(op, p, c, "cpu"); }, "config bm=512 is out of range");
  c.erase("bm");
  expect_error([&] { check_config(op, p, c, "cpu"); }, "is missing bm");
  c["bm"] = 16;
  c["splits"] = 2;
  expect_error([&] { check_config(op, p, c, "cpu"); }, "splits=2 needs swap_ab=1");
  c.erase("splits");
  // Tensors: W must be i32 [K/8, N], scales [K/group, N] in A's dtype.
  using S = std::vector<std::vector<int64_t>>;
  const std::vector<DType> dts = {DType::bf16, DType::i32, DType::bf16, DType::bf16};
  EXPECT_EQ(op.problem_for(S{{3, 256}, {32, 77}, {8, 77}, {3, 77}}, dts, {}).at("group"), 32);
  expect_error(
      [&] {
        op.problem_for(S{{3, 256}, {32, 77}, {8, 77}, {3, 78}}, dts, {});
      },
      "shapes do not agree");
  expect_error(
      [&] {
        op.problem_for(S{{3, 256}, {32, 77}, {8, 77}, {3, 77}},
                       {DType::bf16, DType::bf16, DType::bf16, DType::bf16}, {});
      },
      "W must be i32");
  expect_error(
      [&] {
        op.problem_for(S{{3, 256}, {32, 77}, {8, 77}}, dts, {});
      },
      "takes 4 tensors (A, W, scales, C), got 3");
}

} // namespace
