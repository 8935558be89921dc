// Store rounding matches IEEE round-to-nearest-even: f16 against the compiler's _Float16
// conversion over many bit patterns, bf16 against a direct definition; fp8 (e4m3, e5m2)
// against a brute-force nearest-value search with saturation; small integers saturate.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

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

// --- 8- and 4-bit types --------------------------------------------------------------------

TEST(DType, ExistingValuesAreStableAndEveryNameRoundTrips) {
  // Serialized values: the types that existed first keep their numbers.
  EXPECT_EQ(static_cast<int>(DType::f32), 0);
  EXPECT_EQ(static_cast<int>(DType::f16), 1);
  EXPECT_EQ(static_cast<int>(DType::bf16), 2);
  EXPECT_EQ(static_cast<int>(DType::i32), 3);
  EXPECT_EQ(static_cast<int>(DType::boolean), 4);
  for (DType t : {f32, f16, bf16, i32, DType::boolean, i8, u8, int4, fp8_e4m3, fp8_e5m2}) {
    std::optional<DType> back = parse_dtype(dtype_name(t));
    ASSERT_TRUE(back) << dtype_name(t);
    EXPECT_EQ(*back, t) << dtype_name(t);
  }
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), fp8_e4m3);
  EXPECT_EQ(parse_dtype("uint8"), u8);
  EXPECT_EQ(parse_dtype("i4"), int4);
  EXPECT_EQ(dtype_bits(int4), 4);
  EXPECT_EQ(storage_bytes(int4, 7), 4);
  EXPECT_EQ(storage_bytes(fp8_e5m2, 7), 7);
}

// Every fp8 value, by formula: (-1)^s 2^(e - bias) (1 + m / 2^M), subnormals 2^(1 - bias) m/2^M.
double fp8_formula(DType t, int b) {
  const int M = t == fp8_e4m3 ? 3 : 2, bias = t == fp8_e4m3 ? 7 : 15;
  const int e = (b & 0x7f) >> M, m = b & ((1 << M) - 1);
  double v = e == 0 ? std::ldexp(m, 1 - bias - M) : std::ldexp((1 << M) + m, e - bias - M);
  return b & 0x80 ? -v : v;
}

TEST(DType, Fp8DecodesByTheFormulaWithTheSpecialEncodings) {
  for (int b = 0; b < 256; ++b) {
    float e4 = fp8_bits_to_float(fp8_e4m3, static_cast<uint8_t>(b));
    if ((b & 0x7f) == 0x7f)
      EXPECT_TRUE(std::isnan(e4)) << b; // e4m3: S.1111.111 is NaN, there is no infinity
    else
      EXPECT_EQ(e4, fp8_formula(fp8_e4m3, b)) << b;
    float e5 = fp8_bits_to_float(fp8_e5m2, static_cast<uint8_t>(b));
    if ((b & 0x7c) == 0x7c && (b & 3))
      EXPECT_TRUE(std::isnan(e5)) << b;
    else if ((b & 0x7f) == 0x7c)
      EXPECT_EQ(e5, b & 0x80 ? -INFINITY : INFINITY) << b;
    else
      EXPECT_EQ(e5, fp8_formula(fp8_e5m2, b)) << b;
  }
  EXPECT_EQ(fp8_bits_to_float(fp8_e4m3, 0x7e), 448.0f);
  EXPECT_EQ(fp8_bits_to_float(fp8_e4m3, 0x01), std::ldexp(1.0f, -9)); // smallest subnormal
  EXPECT_EQ(fp8_bits_to_float(fp8_e5m2, 0x7b), 57344.0f);
  EXPECT_EQ(fp8_bits_to_float(fp8_e5m2, 0x01), std::ldexp(1.0f, -16));
}

/// The reference rounding: the nearest finite fp8 value, ties to the even encoding, anything
/// at or beyond the largest finite value (infinity too) saturating to it.
uint8_t fp8_nearest(DType t, float f) {
  const double maxv = t == fp8_e4m3 ? 448 : 57344;
  if (std::fabs(f) >= maxv) return (std::signbit(f) ? 0x80 : 0) | (t == fp8_e4m3 ? 0x7e : 0x7b);
  int best = -1;
  double best_d = INFINITY;
  for (int b = 0; b < 128; ++b) {
    double v = fp8_formula(t, b);
    if (t == fp8_e4m3 && b == 0x7f) continue;
    if (t == fp8_e5m2 && b >= 0x7c) continue;
    double d = std::fabs(std::fabs(static_cast<double>(f)) - v);
    if (d < best_d || (d == best_d && (b & 1) == 0)) best = b, best_d = d;
  }
  return static_cast<uint8_t>(best | (std::signbit(f) ? 0x80 : 0));
}

TEST(DType, Fp8RoundsToNearestEvenAndSaturatesLikeCvtSatfinite) {
  for (DType t : {fp8_e4m3, fp8_e5m2}) {
    std::vector<float> xs = {0.0f,   -0.0f,  1.0f,     1e-30f,    -1e-30f,
                             1e30f,  -1e30f, INFINITY, -INFINITY, 447.9f,
                             448.0f, 449.0f, 464.0f,   57343.0f,  61440.0f};
    // Every value, every midpoint between neighbours and a hair either side of it.
    for (int b = 0; b < 0x7f; ++b) {
      float v = static_cast<float>(fp8_formula(t, b)),
            w = static_cast<float>(fp8_formula(t, b + 1));
      float mid = (v + w) / 2;
      for (float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)})
        xs.insert(xs.end(), {x, -x});
    }
    std::mt19937 rng(11);
    for (int n = 0; n < 20000; ++n) {
      float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
      if (!std::isnan(x)) xs.push_back(x);
    }
    for (float x : xs) {
      uint8_t want = fp8_nearest(t, x);
      ASSERT_EQ(float_to_fp8_bits(t, x), want) << dtype_name(t) << " x=" << x;
      ASSERT_EQ(round_to(t, x), fp8_bits_to_float(t, want)) << dtype_name(t) << " x=" << x;
    }
    EXPECT_TRUE(std::isnan(round_to(t, NAN))) << dtype_name(t);
  }
  EXPECT_EQ(round_to(fp8_e4m3, 1e6), 448);
  EXPECT_EQ(round_to(fp8_e4m3, -INFINITY), -448);
  EXPECT_EQ(round_to(fp8_e5m2, INFINITY), 57344);         // satfinite: no infinity from a store
  EXPECT_EQ(round_to(fp8_e4m3, std::ldexp(1.0, -10)), 0); // half the smallest subnormal: even
  EXPECT_EQ(round_to(fp8_e4m3, 3 * std::ldexp(1.0, -10)), std::ldexp(1.0, -8));
  EXPECT_EQ(round_to(fp8_e4m3, 1.0625), 1.0); // tie between 1 and 1.125 -> even (1)
}

TEST(DType, SmallIntegersTruncateAndSaturate) {
  EXPECT_EQ(round_to(i8, 200), 127);
  EXPECT_EQ(round_to(i8, -200), -128);
  EXPECT_EQ(round_to(i8, -1.7), -1);
  EXPECT_EQ(round_to(i8, NAN), 0);
  EXPECT_EQ(round_to(u8, -3), 0);
  EXPECT_EQ(round_to(u8, 255.9), 255);
  EXPECT_EQ(round_to(u8, 300), 255);
  EXPECT_EQ(round_to(int4, 9), 7);
  EXPECT_EQ(round_to(int4, -9), -8);
  EXPECT_EQ(round_to(int4, -7.9), -7);
}
