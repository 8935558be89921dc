// rope on the CPU: the interpreter agrees with the fp64 reference at odd shapes (T = 1, 7, 33;
// grouped and multi-query heads; D = 128, 64, 6) for prefill positions and decode positions up
// to a 128k context, with and without Llama-3's scaling; position 0 is the identity; the
// in-kernel sin/cos is accurate to 2e-7 over the whole position range; Llama-3 scaling leaves
// high frequencies alone and divides low ones by 8; bad keys, dtypes and configs are rejected
// with a message naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "ops/Operator.h"
#include "ops/rope/Rope.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;

namespace {

Problem problem(const std::map<std::string, std::string>& kv, DType dt = DType::bf16) {
  return rope::parse(kv, dt);
}

void run(const Problem& p, const Config& c, std::vector<HostTensor>& a) {
  interpret(rope::build(p, c), {&a[0], &a[1], &a[2], &a[3], &a[4]});
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
  std::string shape;
  DType dtype;
  Config config; // empty: the default
};

class RopeInterpreter : public testing::TestWithParam<Case> {};

TEST_P(RopeInterpreter, AgreesWithFp64Reference) {
  const Case& c = GetParam();
  std::map<std::string, std::string> kv;
  std::stringstream ss(c.shape);
  for (std::string item; std::getline(ss, item, ',');)
    kv[item.substr(0, item.find('='))] = item.substr(item.find('=') + 1);
  Problem p = problem(kv, c.dtype);
  std::vector<HostTensor> a = rope::make_args(p, 42);
  run(p, c.config.empty() ? rope::default_config(p, "cpu") : c.config, a);
  const int64_t T = p.at("T"), D = p.at("D");
  // One rounding of the output; the reference shares the kernel's f32 angle, so cos and sin
  // add only the polynomial's 1e-7.
  const double rtol = c.dtype == DType::f16 ? 2e-3 : 8e-3;
  EXPECT_LE(excess(a[3], rope::reference(p, a, 3, 0, T, 0, p.at("H"), 0, D), 1e-5, rtol), 0)
      << "q_out of " << c.shape;
  EXPECT_LE(excess(a[4], rope::reference(p, a, 4, 0, T, 0, p.at("Hkv"), 0, D), 1e-5, rtol), 0)
      << "k_out of " << c.shape;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (DType t : {DType::bf16, DType::f16}) {
    for (std::string T : {"1", "7", "33"}) {
      out.push_back({"T=" + T + ",H=32,Hkv=8,D=128", t, {}});
      out.push_back({"T=" + T + ",H=5,Hkv=1,D=64,start=131000", t, {}});
    }
    out.push_back({"T=4,H=3,Hkv=3,D=6,start=8190", t, {}}); // 3 frequencies, none a power of 2
    out.push_back({"T=9,H=4,Hkv=2,D=128,base=10000,scaling=none,start=4000", t, {}});
  }
  // Several tokens per block with a partial last block, and one warp.
  out.push_back({"T=7,H=4,Hkv=2,D=64", DType::bf16, {{"tokens", 4}, {"threads", 32}}});
  out.push_back({"T=5,H=8,Hkv=1,D=128,start=77", DType::bf16, {{"tokens", 2}, {"threads", 64}}});
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_" + dtype_name(i.param.dtype);
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n + "_" + std::to_string(i.index);
}

INSTANTIATE_TEST_SUITE_P(OddShapes, RopeInterpreter, testing::ValuesIn(cases()), case_name);

TEST(Rope, PositionZeroIsTheIdentity) {
  // cos(0) = 1 and sin(0) = 0 exactly: token 0 comes back bit for bit.
  Problem p = problem({{"T", "3"}, {"H", "4"}, {"Hkv", "2"}, {"D", "64"}});
  std::vector<HostTensor> a = rope::make_args(p, 7);
  run(p, rope::default_config(p, "cpu"), a);
  for (int64_t i = 0; i < 4 * 64; ++i)
    ASSERT_EQ(a[3].get(i), a[0].get(i)) << "q element " << i;
  for (int64_t i = 0; i < 2 * 64; ++i)
    ASSERT_EQ(a[4].get(i), a[1].get(i)) << "k element " << i;
}

TEST(Rope, SinCosIsAccurateOverTheWholePositionRange) {
  // |a| up to 2e5 covers position 131071 times inv_freq[0] = 1 (and any lower frequency).
  Dim N("N");
  Tensor A("a", {N}, f32), S("s", {N}, f32), C("c", {N}, f32);
  Kernel k = kernel("sincos", {A, S, C}, grid(ceildiv(N, 128)), threads(128), [&](Var b) {
    Tile x = alloc_fragment({128}, f32), s = alloc_fragment({128}, f32);
    Tile c = alloc_fragment({128}, f32);
    copy(A.tile(b * 128), x);
    parallel({128}, [&](Var i) {
      rope::SinCos sc = rope::sincos_f32(x(i));
      s(i) = sc.sin;
      c(i) = sc.cos;
    });
    copy(s, S.tile(b * 128));
    copy(c, C.tile(b * 128));
  });
  const int n = 20000;
  HostTensor a(f32, {n}), s(f32, {n}), c(f32, {n});
  for (int i = 0; i < n; ++i)
    a.set(i, i < n / 2 ? -10.0 + 20.0 * i / (n / 2) : -205000.0 + 410000.0 * (i - n / 2) / (n / 2));
  interpret(k, {&a, &s, &c});
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(s.get(i) - std::sin(a.get(i))));
    worst = std::max(worst, std::fabs(c.get(i) - std::cos(a.get(i))));
  }
  EXPECT_LT(worst, 2e-7);
}

TEST(Rope, Llama3ScalingKeepsHighAndDividesLowFrequencies) {
  // Wavelengths below 8192 / 4 = 2048 are unchanged, above 8192 divided by the factor 8, and
  // in between blend smoothly (between the two, decreasing with i). The f32 table (HF's
  // arithmetic) agrees with the fp64 one to a few ulp.
  const std::vector<double> plain = rope::inv_freq_f64(128, 500000, false);
  const std::vector<double> l3 = rope::inv_freq_f64(128, 500000, true);
  const std::vector<float> l3f = rope::inv_freq_f32(128, 500000.0f, true);
  int high = 0, low = 0, mid = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    double wl = 2 * std::numbers::pi / plain[i];
    if (wl < 2048) {
      EXPECT_DOUBLE_EQ(l3[i], plain[i]) << i;
      ++high;
    } else if (wl > 8192) {
      EXPECT_DOUBLE_EQ(l3[i], plain[i] / 8) << i;
      ++low;
    } else {
      EXPECT_LT(l3[i], plain[i]) << i;
      EXPECT_GT(l3[i], plain[i] / 8) << i;
      ++mid;
    }
    if (i > 0) EXPECT_LT(l3[i], l3[i - 1]) << i;
    EXPECT_NEAR(l3f[i], l3[i], 1e-6 * l3[i]) << i;
  }
  EXPECT_DOUBLE_EQ(plain[0], 1.0);
  EXPECT_NEAR(plain[1], std::pow(500000.0, -1.0 / 64), 1e-15);
  EXPECT_GT(high, 0);
  EXPECT_GT(low, 0);
  EXPECT_GT(mid, 0);
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Rope, BadInputIsRejectedWithItsName) {
  const std::map<std::string, std::string> ok = {{"T", "4"}, {"H", "8"}, {"Hkv", "2"}, {"D", "64"}};
  auto with = [&](const std::string& k, const std::string& v) {
    auto kv = ok;
    kv[k] = v;
    return kv;
  };
  expect_error(
      [&] {
        rope::parse({{"T", "4"}, {"H", "8"}, {"D", "64"}}, DType::bf16);
      },
      "missing Hkv");
  expect_error([&] { rope::parse(with("D", "63"), DType::bf16); }, "D=63 is odd");
  expect_error([&] { rope::parse(with("scaling", "yarn"), DType::bf16); },
               "scaling=yarn is not supported");
  expect_error([&] { rope::parse(with("base", "0"), DType::bf16); },
               "base=0 is not a positive integer");
  expect_error([&] { rope::parse(with("start", "2147483645"), DType::bf16); },
               "do not fit in the i32 pos tensor");
  expect_error([&] { rope::parse(with("theta", "1"), DType::bf16); }, "unknown shape key 'theta'");
  expect_error([&] { rope::parse(ok, DType::f32); }, "dtype f32 is not supported");
  Problem p = problem({{"T", "4"}, {"H", "32"}, {"Hkv", "8"}, {"D", "128"}});
  const Operator& op = find_operator("rope");
  expect_error(
      [&] {
        check_config(op, p, {{"threads", 128}}, "cpu");
      },
      "is missing tokens (tokens per block)");
  expect_error(
      [&] {
        check_config(op, p, {{"tokens", 1}, {"threads", 48}}, "sm_90a");
      },
      "threads=48 is out of range on sm_90a; threads takes a multiple of 32 in [32, 1024]");
  expect_error(
      [&] {
        rope::validate(p, {{"tokens", 4}, {"threads", 64}});
      },
      "128 elements per thread in each half, more than 64");
}

} // namespace
