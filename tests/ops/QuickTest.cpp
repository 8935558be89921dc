#include <gtest/gtest.h>

#include "ops/Check.h"

using namespace tp;
using namespace tp::ops;

TEST(Quick, GemmAndAttention) {
  const Operator& g = find_operator("gemm");
  Problem p = g.parse({{"M", "77"}, {"N", "45"}, {"K", "133"}}, DType::bf16);
  CheckResult r = check(g, p, {});
  std::cout << to_json(r).dump() << "\n";
  EXPECT_TRUE(r.passed);
  const Operator& a = find_operator("attention");
  Problem q = a.parse({{"B", "2"}, {"H", "4"}, {"S", "77"}, {"D", "64"}, {"Skv", "100"}, {"Hkv", "2"}, {"causal", "1"}, {"lse", "1"}}, DType::bf16);
  CheckResult s = check(a, q, {});
  std::cout << to_json(s).dump() << "\n";
  EXPECT_TRUE(s.passed);
}
