// Host-side tests of the device library's 16-bit float conversions (types.cuh): the host path
// must round exactly like PTX cvt.rn (round to nearest, ties to even) so that host references
// and the CPU interpreter agree bit for bit with the GPU; the fp8 fallback path likewise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "types.cuh"

namespace {

float bf16_value(uint16_t bits) {
  return tp::to_float(tp::bf16{bits});
}
float f16_value(uint16_t bits) {
  return tp::to_float(tp::half{bits});
}

TEST(Types, Bf16KnownValues) {
  EXPECT_EQ(tp::to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(tp::to_bf16(-2.0f).bits, 0xc000);
  EXPECT_EQ(tp::to_bf16(1.0f + 1.0f / 256).bits, 0x3f80); // tie -> even (down)
  EXPECT_EQ(tp::to_bf16(1.0f + 3.0f / 256).bits, 0x3f82); // tie -> even (up)
  EXPECT_EQ(tp::to_bf16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(tp::to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80); // rounds to inf
  EXPECT_TRUE(std::isnan(tp::to_float(tp::to_bf16(std::nanf("")))));
  EXPECT_EQ(bf16_value(0x3f80), 1.0f);
  EXPECT_EQ(bf16_value(0x0001), std::ldexp(1.0f, -133)); // smallest bf16 subnormal
}

// Every finite bf16 converts to f32 and back to itself; each midpoint between neighbours
// (exact in f32) rounds to the even one, and a hair either side rounds to the nearer.
TEST(Types, Bf16RoundTripAndTiesToEvenExhaustive) {
  for (uint32_t h = 0; h < 0x7f80; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint16_t bits = static_cast<uint16_t>(h | sign);
      ASSERT_EQ(tp::to_bf16(bf16_value(bits)).bits, bits);
    }
    if (h + 1 == 0x7f80) break; // the next value up is infinity
    const float lo = bf16_value(static_cast<uint16_t>(h)),
                hi = bf16_value(static_cast<uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;
    ASSERT_EQ(tp::to_bf16(mid).bits, (h % 2 == 0) ? h : h + 1) << "midpoint above " << h;
    ASSERT_EQ(tp::to_bf16(std::nextafter(mid, 0.0f)).bits, h);
    ASSERT_EQ(tp::to_bf16(std::nextafter(mid, hi)).bits, h + 1);
  }
}

TEST(Types, HalfKnownValues) {
  EXPECT_EQ(tp::to_half(1.0f).bits, 0x3c00);
  EXPECT_EQ(tp::to_half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(tp::to_half(65519.0f).bits, 0x7bff);
  EXPECT_EQ(tp::to_half(65520.0f).bits, 0x7c00); // tie between 65504 and 2^16 -> even = inf
  EXPECT_EQ(tp::to_half(-1e9f).bits, 0xfc00);
  EXPECT_EQ(tp::to_half(std::ldexp(1.0f, -24)).bits, 0x0001);
  EXPECT_EQ(tp::to_half(std::ldexp(1.0f, -25)).bits, 0x0000); // tie -> even (zero)
  EXPECT_EQ(tp::to_half(std::ldexp(3.0f, -25)).bits, 0x0002); // 1.5 ulp tie -> even (2)
  EXPECT_EQ(tp::to_half(std::ldexp(1.0f, -30)).bits, 0x0000);
  EXPECT_EQ(tp::to_half(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::isnan(tp::to_float(tp::to_half(std::nanf("")))));
  EXPECT_EQ(f16_value(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_value(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_value(0x7c00), std::numeric_limits<float>::infinity());
}

TEST(Types, HalfRoundTripAndTiesToEvenExhaustive) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint16_t bits = static_cast<uint16_t>(h | sign);
      ASSERT_EQ(tp::to_half(f16_value(bits)).bits, bits) << std::hex << bits;
    }
    if (h + 1 == 0x7c00) break; // the next value up is infinity
    const float lo = f16_value(static_cast<uint16_t>(h)),
                hi = f16_value(static_cast<uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;
    ASSERT_EQ(tp::to_half(mid).bits, (h % 2 == 0) ? h : h + 1) << "midpoint above " << h;
    ASSERT_EQ(tp::to_half(std::nextafter(mid, 0.0f)).bits, h);
    ASSERT_EQ(tp::to_half(std::nextafter(mid, hi)).bits, h + 1);
  }
}

TEST(Types, PackedPairsPutElementZeroInTheLowHalf) {
  const tp::bf16x2 b = tp::to_bf16x2(1.0f, -2.0f);
  EXPECT_EQ(b.bits, 0xc0003f80u);
  EXPECT_EQ(tp::low(b).bits, 0x3f80);
  EXPECT_EQ(tp::high(b).bits, 0xc000);
  EXPECT_EQ(tp::pack(tp::bf16{0x3f80}, tp::bf16{0xc000}).bits, b.bits);
  const tp::half2x h = tp::to_half2x(1.0f, -2.0f);
  EXPECT_EQ(h.bits, 0xc0003c00u);
  EXPECT_EQ(tp::low(h).bits, 0x3c00);
  EXPECT_EQ(tp::high(h).bits, 0xc000);
}

} // namespace

// --- fp8 -----------------------------------------------------------------------------------
// The device library's integer-arithmetic fp8 path (what sm_80 and the host run; sm_89+ use
// cvt.rn.satfinite) agrees with the host library's (frexp / nearbyint) implementation, which
// tests/ir/DTypeTest checks against a brute-force nearest-value search: on every fp8 value,
// every midpoint and its neighbours, and a million f32 bit patterns spread over the range.
uint8_t host_fp8_bits(bool e4m3, float f);
float host_fp8_value(bool e4m3, uint8_t b);

namespace {

uint8_t device_fp8_bits(bool e4m3, float f) {
  return e4m3 ? tp::to_fp8e4m3(f).bits : tp::to_fp8e5m2(f).bits;
}
float device_fp8_value(bool e4m3, uint8_t b) {
  return e4m3 ? tp::to_float(tp::fp8e4m3{b}) : tp::to_float(tp::fp8e5m2{b});
}
bool same(float a, float b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

TEST(Types, Fp8SoftwarePathMatchesTheHostLibrary) {
  for (bool e4m3 : {true, false}) {
    std::vector<float> xs;
    for (int b = 0; b < 256; ++b) {
      const uint8_t u = static_cast<uint8_t>(b);
      ASSERT_TRUE(same(device_fp8_value(e4m3, u), host_fp8_value(e4m3, u))) << e4m3 << " " << b;
      float v = host_fp8_value(e4m3, u), w = host_fp8_value(e4m3, static_cast<uint8_t>(b + 1));
      if (std::isfinite(v) && std::isfinite(w) && (b & 0x7f) != 0x7f) {
        float mid = (v + w) / 2;
        xs.insert(xs.end(),
                  {v, mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)});
      }
    }
    for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4093) {
      float f;
      const uint32_t u = static_cast<uint32_t>(bits);
      std::memcpy(&f, &u, 4);
      xs.push_back(f);
    }
    xs.insert(xs.end(),
              {INFINITY, -INFINITY, std::numeric_limits<float>::denorm_min(), 0.0f, -0.0f});
    for (float x : xs) {
      if (std::isnan(x)) {
        ASSERT_TRUE(std::isnan(device_fp8_value(e4m3, device_fp8_bits(e4m3, x))));
        continue;
      }
      ASSERT_EQ(device_fp8_bits(e4m3, x), host_fp8_bits(e4m3, x))
          << (e4m3 ? "e4m3 " : "e5m2 ") << x;
    }
  }
  EXPECT_EQ(tp::to_fp8e4m3(1e9f).bits, 0x7e);      // satfinite: 448
  EXPECT_EQ(tp::to_fp8e5m2(-INFINITY).bits, 0xfb); // -57344
  EXPECT_EQ(tp::to_fp8e4m3(1.0f).bits, 0x38);
}

} // namespace
