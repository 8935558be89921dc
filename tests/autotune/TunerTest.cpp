// The tuner with fake hooks: who wins, early stop, time limits, failures recorded and skipped,
// compiles overlapping, budgets, and the compile-only mode.
#include <gtest/gtest.h>

#include "FakeHooks.h"
#include "autotune/Tuner.h"
#include "tilepilot/device_error.h"

using namespace tp;
using namespace tp::autotune;
using namespace tp::autotune::testing;

namespace {

TuneOptions quiet() {
  TuneOptions o;
  o.progress = TuneOptions::Progress::off;
  o.brief_iters = 3;
  o.full_iters = 10;
  return o;
}

// Fake timing by bm: a table, defaulting to 1 ms.
std::shared_ptr<FakeBackend> backend(std::map<int64_t, FakeBehaviour> by_bm) {
  auto fb = std::make_shared<FakeBackend>();
  fb->behaviour = [by_bm](const ops::Config& c) {
    auto it = by_bm.find(c.at("bm"));
    return it == by_bm.end() ? FakeBehaviour{} : it->second;
  };
  return fb;
}

const CandidateLog& log_of(const TuneResult& r, int64_t bm) {
  for (const CandidateLog& c : r.log)
    if (c.config.at("bm") == bm) return c;
  throw std::runtime_error("no log for bm=" + std::to_string(bm));
}

} // namespace

TEST(Tuner, FastestCorrectCandidateWins) {
  auto fb = backend({{16, {.ms = 3}}, {32, {.ms = 1}}, {48, {.ms = 2}}});
  TuneResult r = tune(space_of(3), fake_hooks(fb), quiet());
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.best.at("bm"), 32);
  EXPECT_DOUBLE_EQ(r.best_measurement.median_ms(), 1.0);
  EXPECT_EQ(log_of(r, 32).status, CandidateStatus::best);
  EXPECT_NE(r.best_log(), nullptr);
  EXPECT_EQ(r.log.size(), 3u);
  for (const CandidateLog& c : r.log)
    EXPECT_GE(c.compile_s, 0);
}

TEST(Tuner, FullMedianOfAConfigIsItsFullMeasurementOnly) {
  // bm=16 first (1 ms), bm=32 early-stopped (4 ms > 1.5 x 1 ms), bm=48 measured (1.2 ms).
  auto fb = backend({{16, {.ms = 1}}, {32, {.ms = 4}}, {48, {.ms = 1.2}}});
  TuneResult r = tune(space_of(3), fake_hooks(fb), quiet());
  EXPECT_DOUBLE_EQ(full_median_ms(r, {{"bm", 16}}), 1.0);
  EXPECT_DOUBLE_EQ(full_median_ms(r, {{"bm", 48}}), 1.2);
  EXPECT_EQ(log_of(r, 32).status, CandidateStatus::early_stopped);
  EXPECT_EQ(full_median_ms(r, {{"bm", 32}}), -1);
  EXPECT_EQ(full_median_ms(r, {{"bm", 64}}), -1); // not in the space
}

TEST(Tuner, IncorrectCandidateNeverWinsHoweverFast) {
  auto fb = backend({{16, {.ms = 3}}, {32, {.ms = 0.1, .wrong = true}}, {48, {.ms = 2}}});
  TuneResult r = tune(space_of(3), fake_hooks(fb), quiet());
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.best.at("bm"), 48);
  EXPECT_EQ(log_of(r, 32).status, CandidateStatus::incorrect);
  EXPECT_EQ(log_of(r, 32).reason, "fake check: max_abs_err 3.5 > atol 0.02");
}

TEST(Tuner, NoCheckHookMeansNoWinner) {
  TuneHooks h = fake_hooks(backend({}));
  h.check_correct = nullptr;
  TuneResult r = tune(space_of(2), h, quiet());
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.log[0].status, CandidateStatus::incorrect);
  EXPECT_EQ(r.log[0].reason, "no check_correct hook: an unchecked candidate cannot win");
}

TEST(Tuner, EarlyStopDropsSlowCandidatesAfterTheBriefRuns) {
  auto fb = backend({{16, {.ms = 1}}, {32, {.ms = 1.6}}, {48, {.ms = 1.4}}, {64, {.ms = 0.9}}});
  TuneResult r = tune(space_of(4), fake_hooks(fb), quiet());
  EXPECT_EQ(log_of(r, 32).status, CandidateStatus::early_stopped);
  EXPECT_NE(log_of(r, 32).reason.find("brief median 1.6 ms over 3 runs > 1.5 x best 1 ms"),
            std::string::npos)
      << log_of(r, 32).reason;
  EXPECT_EQ(log_of(r, 48).status, CandidateStatus::measured); // within 1.5x: measured in full
  EXPECT_EQ(r.best.at("bm"), 64);
  // The early-stopped candidate was only measured briefly.
  std::lock_guard<std::mutex> lock(fb->mu);
  int calls_32 = 0;
  for (const auto& [cfg, iters] : fb->measure_calls)
    if (cfg == "bm=32") {
      ++calls_32;
      EXPECT_EQ(iters, 3);
    }
  EXPECT_EQ(calls_32, 1);
  // Slower than the best: never checked (it cannot win).
  EXPECT_EQ(fb->checks, 2); // bm=16 (first best) and bm=64 (new best)
}

TEST(Tuner, CompileFailuresAreRecordedAndSkipped) {
  auto fb = backend({{16, {.compile_throws = true}},
                     {32, {.compile_user_error = true}},
                     {48, {.ms = 2}},
                     {64, {.ms = 1, .spill_bytes = 64}},
                     {80, {.measure_throws = true}}});
  TuneResult r = tune(space_of(5), fake_hooks(fb), quiet());
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.best.at("bm"), 48);
  EXPECT_EQ(log_of(r, 16).status, CandidateStatus::compile_failed);
  EXPECT_EQ(log_of(r, 16).reason, "fake ptxas: fatal error");
  EXPECT_EQ(log_of(r, 32).status, CandidateStatus::verify_failed);
  EXPECT_EQ(log_of(r, 32).reason, "fake verifier: tile does not fit");
  EXPECT_EQ(log_of(r, 64).status, CandidateStatus::spills);
  EXPECT_NE(log_of(r, 64).reason.find("ptxas spills 64 bytes"), std::string::npos);
  EXPECT_EQ(log_of(r, 80).status, CandidateStatus::run_failed);
  EXPECT_EQ(log_of(r, 80).reason, "measure threw: fake launch failure");
}

TEST(Tuner, CompileOverItsTimeLimitIsAbandonedNotAwaited) {
  auto fb = backend({{16, {.ms = 2}}, {32, {.ms = 1, .compile_sleep_s = 3}}, {48, {.ms = 1.5}}});
  TuneOptions o = quiet();
  o.per_config_seconds = 0.3;
  auto t0 = std::chrono::steady_clock::now();
  TuneResult r = tune(space_of(3), fake_hooks(fb), o);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(wall, 2.0);
  EXPECT_EQ(log_of(r, 32).status, CandidateStatus::timed_out);
  EXPECT_NE(log_of(r, 32).reason.find("compile took longer than the limit"), std::string::npos);
  EXPECT_EQ(r.best.at("bm"), 48);
}

TEST(Tuner, MeasurementOverItsTimeLimitIsTimedOut) {
  auto fb = backend({{16, {.ms = 2}}, {32, {.ms = 1, .measure_sleep_s = 0.3}}});
  TuneOptions o = quiet();
  o.per_config_seconds = 0.2;
  TuneResult r = tune(space_of(2), fake_hooks(fb), o);
  EXPECT_EQ(log_of(r, 32).status, CandidateStatus::timed_out);
  EXPECT_NE(log_of(r, 32).reason.find("measurement took"), std::string::npos);
  EXPECT_EQ(r.best.at("bm"), 16);
}

TEST(Tuner, CompilesOverlapOnThePool) {
  auto fb = std::make_shared<FakeBackend>();
  fb->behaviour = [](const ops::Config&) { return FakeBehaviour{.compile_sleep_s = 0.2}; };
  TuneOptions o = quiet();
  o.compile_threads = 4;
  auto t0 = std::chrono::steady_clock::now();
  TuneResult r = tune(space_of(8), fake_hooks(fb), o);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.found);
  EXPECT_EQ(fb->compiles, 8);
  EXPECT_GE(fb->max_running, 2);
  EXPECT_LT(wall, 0.75 * 8 * 0.2) << "serial compiles would take 1.6 s";
}

TEST(Tuner, BudgetSkipsCandidatesNotYetStarted) {
  auto fb = std::make_shared<FakeBackend>();
  fb->behaviour = [](const ops::Config&) { return FakeBehaviour{.measure_sleep_s = 0.05}; };
  TuneOptions o = quiet();
  o.budget_seconds = 0.25;
  TuneResult r = tune(space_of(20), fake_hooks(fb), o);
  auto counts = r.status_counts();
  EXPECT_GT(counts["skipped"], 0);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.log.back().reason.find("budget of"), 0u);
}

TEST(Tuner, WithoutMeasureHookOnlyCompiles) {
  TuneHooks h = fake_hooks(backend({{32, {.spill_bytes = 8}}}));
  h.measure = nullptr;
  h.why_no_measure = "no CUDA driver: libcuda.so.1 not found";
  ConfigSpace s = space_of(3);
  Candidate pruned;
  pruned.config = {{"bm", 999}};
  pruned.category = "smem";
  pruned.reason = "too big";
  s.pruned.push_back(pruned);
  TuneResult r = tune(s, h, quiet());
  EXPECT_FALSE(r.found);
  EXPECT_EQ(log_of(r, 16).status, CandidateStatus::compiled);
  EXPECT_EQ(log_of(r, 16).reason, "compile only: no CUDA driver: libcuda.so.1 not found");
  EXPECT_EQ(log_of(r, 32).status, CandidateStatus::spills);
  EXPECT_EQ(log_of(r, 999).status, CandidateStatus::pruned);
  EXPECT_EQ(log_of(r, 999).reason, "too big");
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j["candidates"].size(), 4u);
  EXPECT_EQ(j["status_counts"]["compiled"], 2);
}

TEST(Tuner, NoCompileHookIsAUserError) {
  try {
    tune(space_of(1), TuneHooks{}, quiet());
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    EXPECT_EQ(reason_text(e), "tune: no compile hook; the CUDA backend provides one through "
                              "tp::autotune::set_default_hooks, or pass TuneHooks explicitly");
  }
}

// A sticky fault loses the context: the faulted candidate is run_failed with the fault's
// message, the rest are skipped with the cause (not each failing on its own), nothing is
// found (so nothing is stored), and the fault is kept for the caller to rethrow.
TEST(Tuner, AGpuFaultStopsTheSearchAndFindsNothing) {
  auto fb = backend({{16, {.ms = 1}}, {32, {.measure_faults = true}}, {48, {.ms = 0.5}}});
  TuneResult r = tune(space_of(4), fake_hooks(fb), quiet());
  EXPECT_FALSE(r.found);
  ASSERT_TRUE(r.device_fault);
  EXPECT_EQ(log_of(r, 16).status, CandidateStatus::measured);
  const CandidateLog& f = log_of(r, 32);
  EXPECT_EQ(f.status, CandidateStatus::run_failed);
  EXPECT_NE(f.reason.find("the GPU faulted running this config: the GPU stopped a kernel: "
                          "cuEventSynchronize reported CUDA_ERROR_ILLEGAL_ADDRESS"),
            std::string::npos)
      << f.reason;
  for (int64_t bm : {48, 64}) {
    EXPECT_EQ(log_of(r, bm).status, CandidateStatus::skipped);
    EXPECT_EQ(log_of(r, bm).reason, "not measured: the GPU context was lost when bm=32 faulted");
  }
  EXPECT_EQ(fb->measures, 3) << "16: brief + full, 32: the brief run that faulted, then none";
  EXPECT_NE(to_json(r)["device_fault"].get<std::string>().find("CUDA context is lost"),
            std::string::npos);
  EXPECT_THROW(rethrow_device_fault(r), DeviceFault);
  TuneResult fine = tune(space_of(2), fake_hooks(backend({})), quiet());
  EXPECT_NO_THROW(rethrow_device_fault(fine));
}
