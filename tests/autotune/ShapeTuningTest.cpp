// tune_against_baseline with fake hooks: who wins, when the side-by-side timing runs, what the
// reported times are, and a comparison that throws.
#include <gtest/gtest.h>

#include <cmath>

#include "FakeHooks.h"
#include "autotune/ShapeTuning.h"

using namespace tp;
using namespace tp::autotune;
using namespace tp::autotune::testing;

namespace {

// bm = 16, 32, 48, 64; the baseline is bm=16, searched first as the real space orders it.
ConfigSpace four() {
  ConfigSpace s;
  for (int i = 1; i <= 4; ++i) {
    Candidate c;
    c.config = {{"bm", 16 * i}};
    s.kept.push_back(c);
  }
  return s;
}

const ops::Config kBaseline = {{"bm", 16}};

TuneOptions quiet() {
  TuneOptions o;
  o.progress = TuneOptions::Progress::off;
  o.full_iters = 10;
  return o;
}

std::shared_ptr<FakeBackend> timed(std::map<int64_t, FakeBehaviour> by_bm) {
  auto fb = std::make_shared<FakeBackend>();
  fb->behaviour = [by_bm](const ops::Config& c) {
    auto it = by_bm.find(c.at("bm"));
    return it == by_bm.end() ? FakeBehaviour{} : it->second;
  };
  return fb;
}

int measures_of(const FakeBackend& fb, const std::string& config) {
  int n = 0;
  for (const auto& [c, iters] : fb.measure_calls)
    n += c == config;
  return n;
}

} // namespace

TEST(ShapeTuning, AFasterWinnerIsTimedSideBySideWithTheBaseline) {
  FakeBehaviour base, fast, slow;
  base.ms = 2.0;
  fast.ms = 1.25;
  slow.ms = 2.5;
  auto fb = timed({{16, base}, {32, slow}, {48, fast}, {64, slow}});
  ShapeTuning t = tune_against_baseline(four(), fake_hooks(fb), kBaseline, quiet(), 3, 7);
  ASSERT_EQ(t.outcome, ShapeTuning::Outcome::compared);
  EXPECT_EQ(t.search.best, (ops::Config{{"bm", 48}}));
  ASSERT_TRUE(t.comparison);
  EXPECT_EQ(t.comparison->baseline.ms.size(), 21u);
  EXPECT_DOUBLE_EQ(t.baseline_ms(), 2.0);
  EXPECT_DOUBLE_EQ(t.tuned_ms(), 1.25);
  EXPECT_DOUBLE_EQ(t.speedup(), 1.6);
  EXPECT_STREQ(outcome_name(t.outcome), "compared");
  // The search's brief + full timings, then three side-by-side rounds of each.
  EXPECT_EQ(measures_of(*fb, "bm=16"), 2 + 3);
  EXPECT_EQ(measures_of(*fb, "bm=48"), 2 + 3);
}

TEST(ShapeTuning, ABaselineThatWinsIsNotTimedAgain) {
  FakeBehaviour base, slow;
  base.ms = 1.0;
  slow.ms = 1.2;
  auto fb = timed({{16, base}, {32, slow}, {48, slow}, {64, slow}});
  ShapeTuning t = tune_against_baseline(four(), fake_hooks(fb), kBaseline, quiet());
  ASSERT_EQ(t.outcome, ShapeTuning::Outcome::baseline_best);
  EXPECT_FALSE(t.comparison);
  EXPECT_DOUBLE_EQ(t.speedup(), 1.0);
  EXPECT_DOUBLE_EQ(t.baseline_ms(), t.tuned_ms());
  EXPECT_DOUBLE_EQ(t.tuned_ms(), 1.0);
  EXPECT_EQ(measures_of(*fb, "bm=16"), 2);
  EXPECT_STREQ(outcome_name(t.outcome), "default_best");
}

TEST(ShapeTuning, NoCorrectCandidateHasNoNumbers) {
  FakeBehaviour wrong;
  wrong.wrong = true;
  auto fb = timed({{16, wrong}, {32, wrong}, {48, wrong}, {64, wrong}});
  ShapeTuning t = tune_against_baseline(four(), fake_hooks(fb), kBaseline, quiet());
  EXPECT_EQ(t.outcome, ShapeTuning::Outcome::no_candidate);
  EXPECT_TRUE(std::isnan(t.speedup()));
  EXPECT_TRUE(std::isnan(t.baseline_ms()));
}

TEST(ShapeTuning, ABaselineThatCannotRunIsAFailedComparisonNotACrash) {
  // The baseline's compile fails (the search records it and moves on); comparing with it then
  // fails the same way and says so.
  FakeBehaviour broken, fine;
  broken.compile_throws = true;
  fine.ms = 1.0;
  auto fb = timed({{16, broken}, {32, fine}});
  ShapeTuning t = tune_against_baseline(four(), fake_hooks(fb), kBaseline, quiet());
  ASSERT_EQ(t.outcome, ShapeTuning::Outcome::compare_failed);
  EXPECT_NE(t.error.find("fake ptxas: fatal error"), std::string::npos) << t.error;
  EXPECT_TRUE(std::isnan(t.speedup()));
}
