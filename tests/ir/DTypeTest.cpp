// Store rounding matches IEEE round-to-nearest-even: f16 against the compiler's _Float16
// conversion over many bit patterns, bf16 against a direct definition.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "tilepilot/dtype.h"

using namespace tp;

TEST(DType, HalfRoundingMatchesFloat16) {
  std::mt19937 rng(7);
  for (int n = 0; n < 200000; ++n) {
    uint32_t bits = rng();
    float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) continue;
    _Float16 h = static_cast<_Float16>(f);
    uint16_t want = std::bit_cast<uint16_t>(h);
    ASSERT_EQ(float_to_half_bits(f), want) << "f=" << f << " bits=" << std::hex << bits;
    ASSERT_EQ(half_bits_to_float(want), static_cast<float>(h));
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly between two bf16 values (1 and 1 + 2^-7): ties go to even (1).
  EXPECT_EQ(round_to(DType::bf16, 1.0 + std::ldexp(1.0, -8)), 1.0);
  EXPECT_EQ(round_to(DType::bf16, 1.0 + 3 * std::ldexp(1.0, -8)), 1.0 + std::ldexp(1.0, -6));
  EXPECT_EQ(round_to(DType::bf16, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20)),
            1.0 + std::ldexp(1.0, -7));
  EXPECT_TRUE(std::isnan(round_to(DType::bf16, NAN)));
  EXPECT_EQ(round_to(DType::bf16, 1e39), INFINITY);
}

TEST(DType, I32TruncatesTowardZero) {
  EXPECT_EQ(round_to(DType::i32, 2.7), 2);
  EXPECT_EQ(round_to(DType::i32, -2.7), -2);
}
