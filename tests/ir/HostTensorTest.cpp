// HostTensor's bit layouts and fillers: int4 packs two elements a byte (even element in the low
// nibble, sign-extended on read), 8-bit types store saturated, fill_random stays inside
// [lo, hi) for every integer dtype, and poison gives each dtype's documented marker.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "tilepilot/error.h"
#include "tilepilot/tensor.h"

using namespace tp;

TEST(HostTensor, Int4PacksLowNibbleFirstAndSignExtends) {
  HostTensor t(int4, {5});
  EXPECT_EQ(t.bytes(), 3u); // (5 + 1) / 2
  t.set(0, -8);
  t.set(1, 7);
  t.set(2, -1);
  t.set(3, 1);
  t.set(4, 100); // saturates to 7
  const auto* b = static_cast<const uint8_t*>(t.data());
  EXPECT_EQ(b[0], 0x78); // element 0 = -8 (0x8) low, element 1 = 7 high
  EXPECT_EQ(b[1], 0x1f); // element 2 = -1 (0xf) low, element 3 = 1 high
  EXPECT_EQ(b[2], 0x07);
  std::vector<double> want = {-8, 7, -1, 1, 7};
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(t.get(i), want[i]) << i;
  t.set(1, -3); // rewriting one nibble keeps its neighbour
  EXPECT_EQ(t.get(0), -8);
  EXPECT_EQ(t.get(1), -3);
}

TEST(HostTensor, EightBitTypesKeepTheirBits) {
  HostTensor a(i8, {3}), b(u8, {3}), c(fp8_e4m3, {3});
  a.set(0, -128), a.set(1, 500), a.set(2, -2.5);
  EXPECT_EQ(static_cast<const int8_t*>(a.data())[0], -128);
  EXPECT_EQ(a.get(1), 127);
  EXPECT_EQ(a.get(2), -2);
  b.set(0, 255), b.set(1, -1), b.set(2, 17.9);
  EXPECT_EQ(b.get(0), 255);
  EXPECT_EQ(b.get(1), 0);
  EXPECT_EQ(b.get(2), 17);
  c.set(0, 1.0), c.set(1, 1000), c.set(2, -0.0);
  EXPECT_EQ(static_cast<const uint8_t*>(c.data())[0], 0x38); // 1.0 = 0.0111.000
  EXPECT_EQ(c.get(1), 448);
  EXPECT_EQ(static_cast<const uint8_t*>(c.data())[2], 0x80);
}

// The documented range is [lo, hi): hi itself never comes out (it did for i32, whose
// distribution's bounds are both inclusive), and every value below it does.
TEST(HostTensor, FillRandomIntegersStayBelowHi) {
  for (DType t : {i32, i8, u8, int4}) {
    HostTensor h(t, {4000});
    h.fill_random(3, 0, 3);
    std::set<double> seen;
    for (int64_t i = 0; i < h.numel(); ++i)
      seen.insert(h.get(i));
    EXPECT_EQ(seen, (std::set<double>{0, 1, 2})) << dtype_name(t);
  }
  HostTensor h(i32, {4000});
  h.fill_random(5, -1.5, 1.5); // the integers in [-1.5, 1.5): -1, 0, 1
  std::set<double> seen;
  for (int64_t i = 0; i < h.numel(); ++i)
    seen.insert(h.get(i));
  EXPECT_EQ(seen, (std::set<double>{-1, 0, 1}));
}

TEST(HostTensor, FillRandomRangeOutsideTheDtypeIsAUserError) {
  HostTensor h(u8, {4});
  try {
    h.fill_random(1, 300, 400);
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no u8 value (u8 holds 0 to 255)"),
              std::string::npos)
        << e.what();
  }
  HostTensor q(int4, {64});
  q.fill_random(2, -100, 100); // clipped to int4's -8..7
  for (int64_t i = 0; i < q.numel(); ++i)
    EXPECT_TRUE(q.get(i) >= -8 && q.get(i) <= 7);
}

TEST(HostTensor, PoisonMarksEveryDtype) {
  for (DType t : {f32, f16, bf16, fp8_e4m3, fp8_e5m2}) {
    HostTensor h(t, {3});
    h.poison();
    EXPECT_TRUE(std::isnan(h.get(2))) << dtype_name(t);
  }
  std::vector<std::pair<DType, double>> ints = {
      {i32, -2147483648.0}, {i8, -128}, {u8, 255}, {int4, -8}};
  for (auto [t, v] : ints) {
    HostTensor h(t, {3});
    h.poison();
    EXPECT_EQ(h.get(2), v) << dtype_name(t);
  }
}

// fill_random fills 2^20-element chunks from independent streams on several threads. The values
// must depend only on the seed: a tensor within one chunk is exactly the mt19937_64 stream of
// the seed, a larger one starts with that same stream and continues with other values, and two
// fills agree element for element.
TEST(HostTensor, FillRandomOfALargeTensorIsDeterministicAndStartsWithTheSeedsStream) {
  const int64_t chunk = int64_t(1) << 20, n = 3 * chunk + 12345;
  HostTensor a(DType::f32, {n}), b(DType::f32, {n});
  a.fill_random(7);
  b.fill_random(7);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(a.get(i), static_cast<float>(d(rng))) << i;
  // The chunks are not copies of each other, and the last partial one is filled too.
  int64_t same = 0;
  for (int64_t i = 0; i < 1000; ++i)
    same += a.get(i) == a.get(chunk + i) || a.get(i) == a.get(2 * chunk + i);
  EXPECT_LT(same, 5);
  double tail = 0;
  for (int64_t i = 3 * chunk; i < n; ++i)
    tail += std::fabs(a.get(i));
  EXPECT_GT(tail / 12345, 0.4); // uniform on [-1, 1): mean |x| = 0.5
  HostTensor c(DType::f32, {n});
  c.fill_random(8);
  EXPECT_NE(std::memcmp(a.data(), c.data(), a.bytes()), 0);
}
