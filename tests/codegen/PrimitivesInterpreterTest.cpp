// The CPU interpreter on the primitives kernel (PrimitivesKernel.h) against plain C++: the bit
// operators on 32-bit two's complement values (arithmetic >>, counts modulo 32), fp8 / i8 / u8 /
// int4 stores and casts (round to nearest even, saturating), int4 nibble loads and unpacking,
// converting tile copies, and the math functions computed in double and rounded to f32.
#include <gtest/gtest.h>

#include "PrimitivesKernel.h"
#include "codegen/cpu/Interpreter.h"

using namespace tp;
using namespace tp::test;

namespace {

int32_t shl32(int32_t a, int32_t s) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) << (s & 31));
}

double sat(double v, double lo, double hi) {
  if (std::isnan(v)) return 0;
  return std::fmax(lo, std::fmin(hi, std::trunc(v)));
}

float to_f32(double v) {
  return static_cast<float>(v);
}

double fp8(DType t, double v) {
  return fp8_bits_to_float(t, float_to_fp8_bits(t, to_f32(v)));
}

class PrimitivesOnInterpreter : public testing::Test {
protected:
  void SetUp() override {
    args_ = primitives_args(7);
    std::vector<HostTensor*> p;
    for (HostTensor& h : args_)
      p.push_back(&h);
    cpu::interpret(primitives_kernel(), p);
  }
  double in(int p, int64_t i) const { return args_[p].get(i); }
  double out(int p, int row, int64_t i) const { return args_[p].get(row * kPrimN + i); }
  /// Compares one output row with `want(i)`.
  template <typename F>
  void check(int p, int row, F want, const char* what) {
    int bad = 0;
    for (int64_t i = 0; i < kPrimN; ++i) {
      double w = want(i), g = out(p, row, i);
      if (!same_value(g, w) && bad++ < 4)
        ADD_FAILURE() << what << " at " << i << ": got " << g << ", want " << w;
    }
    EXPECT_EQ(bad, 0) << what;
  }
  std::vector<HostTensor> args_;
};

} // namespace

TEST_F(PrimitivesOnInterpreter, BitOperatorsAre32BitTwosComplement) {
  auto A = [&](int64_t i) { return static_cast<int32_t>(in(pI, i)); };
  auto S = [&](int64_t i) { return static_cast<int32_t>(in(pS, i)); };
  check(
      pBits, 0, [&](int64_t i) { return A(i) & S(i); }, "&");
  check(
      pBits, 1, [&](int64_t i) { return A(i) | S(i); }, "|");
  check(
      pBits, 2, [&](int64_t i) { return A(i) ^ S(i); }, "^");
  check(
      pBits, 3, [&](int64_t i) { return ~A(i); }, "~");
  check(
      pBits, 4, [&](int64_t i) { return shl32(A(i), S(i)); }, "<<");
  check(
      pBits, 5, [&](int64_t i) { return A(i) >> (S(i) & 31); }, ">> (arithmetic)");
  check(
      pBits, 6, [&](int64_t i) { return static_cast<int32_t>(in(pW, i)) >> (S(i) & 7); }, "u8 >>");
  check(
      pBits, 7, [&](int64_t i) { return shl32(A(i), 3); }, "<< 3");
  // The inputs reach the cases the rule is about.
  bool negative_count = false, wide_count = false;
  for (int64_t i = 0; i < kPrimN; ++i)
    negative_count |= S(i) < 0, wide_count |= S(i) >= 32;
  EXPECT_TRUE(negative_count && wide_count);
}

TEST_F(PrimitivesOnInterpreter, Fp8StoresRoundToNearestEvenAndSaturate) {
  for (auto [p, t] : {std::pair{pO4, fp8_e4m3}, std::pair{pO5, fp8_e5m2}}) {
    check(
        p, 0, [&](int64_t i) { return fp8(t, in(pX, i)); }, "fp8 <- f32");
    check(
        p, 1, [&](int64_t i) { return fp8(t, in(pH, i)); }, "fp8 <- f16");
    check(
        p, 2, [&](int64_t i) { return fp8(t, in(pB, i)); }, "fp8 <- bf16");
    check(
        p, 3, [&](int64_t i) { return fp8(t, to_f32(in(pI, i))); }, "fp8 <- i32");
  }
  EXPECT_EQ(out(pO4, 0, 3), 448); // +inf saturates
  EXPECT_EQ(out(pO5, 0, 4), -57344);
}

TEST_F(PrimitivesOnInterpreter, Fp8LoadsAndCastsAreExactConversions) {
  check(
      pFp, 0, [&](int64_t i) { return fp8_bits_to_float(fp8_e4m3, uint8_t(i)); }, "e4m3 load");
  check(
      pFp, 1, [&](int64_t i) { return fp8_bits_to_float(fp8_e5m2, uint8_t(i)); }, "e5m2 load");
  check(
      pFp, 2, [&](int64_t i) { return round_to(f16, in(pE4, i)) * 2; }, "cast f16");
  check(
      pFp, 3, [&](int64_t i) { return round_to(bf16, in(pE5, i)); }, "cast bf16");
  check(
      pFp, 4, [&](int64_t i) { return fp8(fp8_e4m3, in(pX, i)); }, "cast e4m3");
  check(
      pFp, 5, [&](int64_t i) { return fp8(fp8_e5m2, to_f32(in(pX, i) * 1000)); }, "cast e5m2");
}

TEST_F(PrimitivesOnInterpreter, SmallIntegerStoresTruncateAndSaturate) {
  check(
      pI8, 0, [&](int64_t i) { return sat(to_f32(in(pX, i) * 200), -128, 127); }, "i8 <- f32");
  check(
      pI8, 1, [&](int64_t i) { return sat(in(pI, i), -128, 127); }, "i8 <- i32");
  check(
      pI8, 2, [&](int64_t i) { return in(pW, i) - 128; }, "i8 <- u8 - 128");
  check(
      pU8, 0, [&](int64_t i) { return sat(to_f32(in(pX, i) * 300), 0, 255); }, "u8 <- f32");
  check(
      pU8, 1, [&](int64_t i) { return sat(in(pI, i), 0, 255); }, "u8 <- i32");
  check(
      pU8, 2,
      [&](int64_t i) {
        return (static_cast<int32_t>(in(pQ, i)) & 15) |
               ((static_cast<int32_t>(in(pI, i)) & 15) << 4);
      },
      "pack_int4");
}

TEST_F(PrimitivesOnInterpreter, Int4ReadsOneSignExtendedNibble) {
  const auto* q = static_cast<const uint8_t*>(args_[pQ].data());
  check(
      pQo, 0, [&](int64_t i) { return (((q[i / 2] >> (i % 2 * 4)) & 15) ^ 8) - 8; },
      "int4 element load");
  check(
      pQo, 1, [&](int64_t i) { return ((int(i) & 15) ^ 8) - 8; }, "unpack_int4(b, 0)");
  check(
      pQo, 2, [&](int64_t i) { return ((int(i) >> 4) ^ 8) - 8; }, "unpack_int4(b, 1)");
  check(
      pQo, 3, [&](int64_t i) { return sat(to_f32(in(pX, i) * 10), -8, 7); }, "cast int4");
  check(
      pQo, 4, [&](int64_t i) { return sat(in(pE4, i), -2147483648.0, 2147483647.0); },
      "cast i32 of e4m3");
  check(
      pCopy, 0, [&](int64_t i) { return in(pQ, i); }, "copy int4 -> f16 tile -> f32");
  check(
      pCopy, 1, [&](int64_t i) { return in(pE4, i); }, "copy e4m3 -> e4m3 tile -> f32");
}

TEST_F(PrimitivesOnInterpreter, MathIsDoubleRoundedToF32) {
  check(
      pMath, 0, [&](int64_t i) { return to_f32(std::tanh(in(pX, i))); }, "tanh");
  check(
      pMath, 1, [&](int64_t i) { return to_f32(std::erf(in(pX, i))); }, "erf");
  check(
      pMath, 2,
      [&](int64_t i) { return to_f32(1 / (1 + std::exp(-double(to_f32(in(pX, i) * 4))))); },
      "sigmoid");
  check(
      pMath, 3,
      [&](int64_t i) {
        double x = in(pX, i);
        return to_f32(std::pow(double(to_f32(std::fabs(x) + 0.25)), double(to_f32(x * 2))));
      },
      "pow");
}
