// compare_configs with fake hooks: the two configs alternate (and alternate who goes first), every
// sample is kept, the speedup is baseline / candidate, and errors propagate.
#include <gtest/gtest.h>

#include "FakeHooks.h"
#include "autotune/Compare.h"

using namespace tp;
using namespace tp::autotune;
using namespace tp::autotune::testing;

namespace {

std::shared_ptr<FakeBackend> two_speeds(double base_ms, double cand_ms) {
  auto fb = std::make_shared<FakeBackend>();
  fb->behaviour = [=](const ops::Config& c) {
    FakeBehaviour b;
    b.ms = c.at("bm") == 64 ? base_ms : cand_ms;
    return b;
  };
  return fb;
}

const ops::Config kBase = {{"bm", 64}}, kCand = {{"bm", 128}};

} // namespace

TEST(Compare, AlternatesAndKeepsEverySample) {
  auto fb = two_speeds(2.0, 1.6);
  SideBySide r = compare_configs(fake_hooks(fb), kBase, kCand, 4, 5);
  EXPECT_EQ(fb->compiles.load(), 2);
  ASSERT_EQ(fb->measure_calls.size(), 8u);
  const std::string b = ops::config_str(kBase), c = ops::config_str(kCand);
  const std::vector<std::string> order = {b, c, c, b, b, c, c, b};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(fb->measure_calls[i].first, order[i]) << "call " << i;
    EXPECT_EQ(fb->measure_calls[i].second, 5);
  }
  EXPECT_EQ(r.baseline.ms.size(), 20u);
  EXPECT_EQ(r.candidate.ms.size(), 20u);
  EXPECT_DOUBLE_EQ(r.speedup(), 2.0 / 1.6);
}

TEST(Compare, SlowerCandidateHasSpeedupBelowOne) {
  SideBySide r = compare_configs(fake_hooks(two_speeds(1.0, 1.25)), kBase, kCand, 2, 3);
  EXPECT_DOUBLE_EQ(r.speedup(), 0.8);
}

TEST(Compare, ErrorsPropagate) {
  auto fb = std::make_shared<FakeBackend>();
  fb->behaviour = [](const ops::Config& c) {
    FakeBehaviour b;
    b.measure_throws = c.at("bm") == 128;
    return b;
  };
  EXPECT_THROW(compare_configs(fake_hooks(fb), kBase, kCand), std::runtime_error);
  TuneHooks no_measure = fake_hooks(fb);
  no_measure.measure = nullptr;
  EXPECT_THROW(compare_configs(no_measure, kBase, kBase), std::logic_error);
  EXPECT_THROW(compare_configs(fake_hooks(fb), kBase, kBase, 0), std::logic_error);
}
