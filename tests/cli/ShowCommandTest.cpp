// `tilepilot show` prints the variant a launch at --shape compiles (the target in the generated
// source's first line, which is also part of the kernel cache key): paired stores without
// alignment tests where the output's rows are even, the general code where they are odd, and
// no TMA where the rows are not 16-byte multiples. An explicit --arch still wins.
#include <gtest/gtest.h>

#include "RunCli.h"

namespace {

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

std::string show_cuda(const std::string& args) {
  tp::testing::CliResult r = tp::testing::run_cli("show gemm --stage cuda " + args);
  EXPECT_EQ(r.rc, 0) << r.out;
  return first_line(r.out);
}

} // namespace

TEST(ShowCommand, PrintsTheVariantALaunchAtTheShapeTakes) {
  // Rows of 16-byte multiples: TMA loads A and B and stores C (the even bit is C's, for the
  // variant that would store it from registers).
  EXPECT_NE(show_cuda("--shape M=256,N=256,K=64").find("for sm_90a-even4 "), std::string::npos);
  EXPECT_NE(show_cuda("--shape M=256,N=264,K=64").find("for sm_90a-even4 "), std::string::npos);
  // B as [N, K] with K = 64: TMA loads both operands, but C's rows of 250 elements are not
  // 16-byte multiples, so C (parameter 2) is stored from registers, in even pairs.
  EXPECT_NE(show_cuda("--shape M=256,N=250,K=64,layout=nt").find("for sm_90a-even4-regstores4 "),
            std::string::npos);
  // An odd row length: rows are not 16-byte multiples (no TMA) and pairs need their tests.
  EXPECT_NE(show_cuda("--shape M=256,N=255,K=64").find("for sm_90a-notma "), std::string::npos);
  // Even, but not a 16-byte multiple: no TMA, and the even pairs still drop their tests.
  EXPECT_NE(show_cuda("--shape M=256,N=250,K=64").find("for sm_90a-notma-even4 "),
            std::string::npos);
  EXPECT_NE(show_cuda("--shape M=256,N=255,K=64 --arch sm_80").find("for sm_80 "),
            std::string::npos);
}
