// known_divisor: what an index expression's form alone says about its factors. Lowering drops
// an alignment test on its answer, so every "known" claim below must hold for every binding.
#include <gtest/gtest.h>

#include <tilepilot/tilepilot.h>

#include "ir/KnownDivisor.h"

using namespace tp;
using ir::known_divisor;
using ir::known_multiple_of;

TEST(KnownDivisor, ConstantsAreExactAndZeroDividesByEverything) {
  EXPECT_EQ(known_divisor(Expr(12)), 12);
  EXPECT_EQ(known_divisor(Expr(-6)), 6);
  EXPECT_EQ(known_divisor(Expr(0)), 0);
  EXPECT_TRUE(known_multiple_of(Expr(0), 2));
  EXPECT_FALSE(known_multiple_of(Expr(7), 2));
}

TEST(KnownDivisor, AVariableIsUnknownUntilMultiplied) {
  Var x("x"), y("y");
  EXPECT_EQ(known_divisor(x), 1);
  EXPECT_EQ(known_divisor(x * 256), 256);
  EXPECT_EQ(known_divisor(Expr(4) * (y * 6)), 24);
  // A sum is known only as far as every term is.
  EXPECT_EQ(known_divisor(x * 256 + y * 6), 2);
  EXPECT_EQ(known_divisor(x * 256 + y * 6 + 1), 1);
  EXPECT_EQ(known_divisor(x * 8 - y * 12), 4);
  EXPECT_EQ(known_divisor(min(x * 4, y * 6)), 2);
}

TEST(KnownDivisor, RemaindersByConstants) {
  Var q("q"), lane("lane");
  // (2q) % 128 is even; (2q) % 2 is always 0; x % 6 knows nothing more of an unknown x.
  EXPECT_EQ(known_divisor((q * 2) % 128), 2);
  EXPECT_EQ(known_divisor((q * 2) % 2), 0);
  EXPECT_EQ(known_divisor(q % 6), 1);
  // A register column of an accumulator: (r / 4) * 8 + r % 2 + (lane % 4) * 2 with r = 2q.
  Expr r = (q * 2) % 128;
  Expr col = (r / 4) * 8 + r % 2 + (lane % 4) * 2;
  EXPECT_TRUE(known_multiple_of(Var("bx") * 256 + col, 2));
  // The odd register of the pair is not.
  Expr r1 = (q * 2 + 1) % 128;
  EXPECT_FALSE(known_multiple_of((r1 / 4) * 8 + r1 % 2 + (lane % 4) * 2, 2));
}

TEST(KnownDivisor, DivisionsSelectsAndLoadsAreUnknownUnlessEveryBranchIsKnown) {
  Var x("x"), c("c");
  EXPECT_EQ(known_divisor((x * 8) / 2), 1) << "a quotient's factors are not tracked";
  EXPECT_EQ(known_divisor(select(c > 0, x * 4, Expr(6))), 2);
  EXPECT_EQ(known_divisor(select(c > 0, x * 4, x)), 1);
  Tensor t("t", {Dim("n")}, i32);
  Expr load = ir::Load::make(t.buffer(), {x * 4});
  EXPECT_EQ(known_divisor(load), 1) << "a loaded value, whatever its index";
  EXPECT_EQ(known_divisor(load * 2), 2);
}

TEST(KnownDivisor, HugeProductsStayTrueDivisors) {
  Var x("x");
  const int64_t big = int64_t{1} << 30;
  int64_t d = known_divisor(x * big * big * big);
  EXPECT_GT(d, 0);
  EXPECT_EQ(d % big, 0);
}
