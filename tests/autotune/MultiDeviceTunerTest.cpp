// The tuner spread over several devices. With fake hooks (deterministic per-config times): 1, 2
// and 3 devices give the same log, winner, checks and database entry; every device is used and
// no two calls overlap on one device while different devices do run at once; a device whose
// measurements throw fails only its own candidates; TILEPILOT_TUNE_DEVICES rejects bad values.
// On a GPU (label gpu): the CUDA hooks on every visible GPU, and two tuner workers taking turns
// on one GPU, pick valid, correct winners from the same valid set as one device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "FakeHooks.h"
#include "RunCli.h"
#include "autotune/ConfigSpace.h"
#include "autotune/CudaHooks.h"
#include "autotune/Policy.h"
#include "autotune/Tuner.h"
#include "ops/CudaCheck.h"
#include "tilepilot/device_error.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::autotune;
using namespace tp::autotune::testing;
using tp::testing::CliResult;
using tp::testing::run_cli;

namespace {

TuneOptions quiet() {
  TuneOptions o;
  o.progress = TuneOptions::Progress::off;
  o.brief_iters = 3;
  o.full_iters = 10;
  o.compile_threads = 2;
  return o;
}

// Twelve configs that exercise every decision: a slow first best, an early stop that only the
// fold can decide (its brief is measured before the first best is known), a fast wrong one,
// compile and measure failures, a spill, and later, faster winners. Each measure sleeps, so
// devices really measure at the same time.
std::shared_ptr<FakeBackend> mixed_backend(int devices) {
  auto fb = std::make_shared<FakeBackend>();
  fb->devices = devices;
  fb->behaviour = [](const ops::Config& c) {
    FakeBehaviour b;
    b.measure_sleep_s = 0.004;
    switch (c.at("bm") / 16) {
    case 1:
      b.ms = 3;
      break;
    case 2:
      b.ms = 2.5;
      break;
    case 3:
      b.ms = 9;
      break; // early-stopped against 3 ms
    case 4:
      b.ms = 0.5, b.wrong = true;
      break;
    case 5:
      b.ms = 1.8;
      break;
    case 6:
      b.compile_throws = true;
      break;
    case 7:
      b.ms = 2.0;
      break;
    case 8:
      b.spill_bytes = 64;
      break;
    case 9:
      b.ms = 1.2;
      break;
    case 10:
      b.measure_throws = true;
      break;
    case 11:
      b.ms = 5;
      break; // early-stopped against 1.2 ms
    default:
      b.ms = 1.1;
      break;
    }
    return b;
  };
  return fb;
}

// Everything of a candidate's log but the seconds, which are wall-clock readings.
nlohmann::json decisions(const TuneResult& r) {
  nlohmann::json j = to_json(r);
  j.erase("wall_s");
  for (auto& c : j["candidates"])
    for (const char* k : {"compile_s", "check_s", "measure_s"})
      c.erase(k);
  return j;
}

nlohmann::json db_entry(const TuneResult& r) {
  TuneKey key;
  key.op = "fake";
  key.dtype = "bf16";
  DbEntry e = winner_entry(key, r, {{"bm", 16}}, "test");
  nlohmann::json j = e.to_json();
  j["extra"].erase("wall_s");
  return j;
}

// Per device, the calls sorted by start; each must end before the next starts.
void expect_no_overlap_per_device(const FakeBackend& fb) {
  for (int d = 0; d < fb.devices; ++d) {
    std::vector<FakeBackend::Use> on;
    for (const auto& u : fb.uses)
      if (u.device == d) on.push_back(u);
    EXPECT_FALSE(on.empty()) << "device " << d << " was never used";
    std::sort(on.begin(), on.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < on.size(); ++i)
      EXPECT_LE(on[i - 1].end, on[i].begin)
          << "device " << d << ": '" << on[i - 1].what << "' overlaps '" << on[i].what << "'";
  }
}

bool some_calls_overlap_across_devices(const FakeBackend& fb) {
  for (const auto& a : fb.uses)
    for (const auto& b : fb.uses)
      if (a.device != b.device && a.begin < b.end && b.begin < a.end) return true;
  return false;
}

// The device each config was measured on, from the fake's record.
int device_of(const FakeBackend& fb, const std::string& config) {
  for (const auto& u : fb.uses)
    if (u.what == "measure " + config) return u.device;
  return -1;
}

} // namespace

TEST(MultiDeviceTuner, OneTwoAndThreeDevicesDecideIdentically) {
  auto one = mixed_backend(1);
  TuneResult r1 = tune(space_of(12), fake_hooks(one), quiet());
  ASSERT_TRUE(r1.found);
  EXPECT_EQ(r1.best.at("bm"), 12 * 16);
  auto counts = r1.status_counts();
  EXPECT_EQ(counts["early_stopped"], 2);
  EXPECT_EQ(counts["incorrect"], 1);
  EXPECT_EQ(counts["run_failed"], 1);
  for (int devices : {2, 3}) {
    auto fb = mixed_backend(devices);
    TuneResult r = tune(space_of(12), fake_hooks(fb), quiet());
    EXPECT_EQ(decisions(r), decisions(r1)) << devices << " devices";
    EXPECT_EQ(db_entry(r), db_entry(r1)) << devices << " devices";
    EXPECT_EQ(fb->checks.load(), one->checks.load())
        << "the same candidates are checked, once each, with " << devices << " devices";
    EXPECT_GE(fb->measures.load(), one->measures.load());
    expect_no_overlap_per_device(*fb);
    EXPECT_TRUE(some_calls_overlap_across_devices(*fb)) << devices << " devices never overlapped";
  }
  expect_no_overlap_per_device(*one);
}

TEST(MultiDeviceTuner, SpeculativeFullTimingsNeverChangeAnEarlyStop) {
  // bm=16 (4 ms) becomes the best only when folded; bm=32 (7 ms) was probed before that, so
  // it was fully timed, yet is early-stopped like on one device. bm=48 then starts knowing the
  // 4 ms best and is stopped after its brief timing alone.
  auto fb = std::make_shared<FakeBackend>();
  fb->devices = 2;
  fb->behaviour = [](const ops::Config& c) {
    FakeBehaviour b;
    b.ms = c.at("bm") == 16 ? 4 : 7;
    b.measure_sleep_s = 0.002;
    return b;
  };
  TuneResult r = tune(space_of(3), fake_hooks(fb), quiet());
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.log[1].status, CandidateStatus::early_stopped);
  EXPECT_EQ(r.log[1].median_ms, -1) << "a discarded full timing must not show in the log";
  EXPECT_EQ(r.log[2].status, CandidateStatus::early_stopped);
  std::vector<std::pair<std::string, int>> want = {
      {"bm=16", 3}, {"bm=32", 3}, {"bm=16", 10}, {"bm=32", 10}, {"bm=48", 3}};
  auto calls = fb->measure_calls;
  std::sort(calls.begin(), calls.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(calls, want);
}

TEST(MultiDeviceTuner, AFailingDeviceFailsOnlyItsOwnCandidates) {
  auto fb = std::make_shared<FakeBackend>();
  fb->devices = 3;
  fb->failing_device = 1;
  fb->behaviour = [](const ops::Config& c) {
    FakeBehaviour b;
    b.ms = 1.0 + 0.01 * double(c.at("bm"));
    b.measure_sleep_s = 0.002;
    return b;
  };
  TuneResult r = tune(space_of(9), fake_hooks(fb), quiet());
  ASSERT_TRUE(r.found);
  int failed = 0;
  for (const CandidateLog& c : r.log) {
    int d = device_of(*fb, ops::config_str(c.config));
    ASSERT_GE(d, 0) << ops::config_str(c.config) << " was never measured";
    if (d == 1) {
      ++failed;
      EXPECT_EQ(c.status, CandidateStatus::run_failed);
      EXPECT_EQ(c.reason, "measure threw: fake device 1 lost");
    } else {
      EXPECT_NE(c.status, CandidateStatus::run_failed) << c.reason;
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_NE(device_of(*fb, ops::config_str(r.best)), 1);
}

// A GPU fault on one device's worker stops the whole search as it does on one device: the
// faulted candidate is run_failed with the fault, every later one (those in flight on the other
// devices too) is skipped with the cause, nothing is found, and the fault is kept to rethrow.
TEST(MultiDeviceTuner, AGpuFaultOnOneWorkerStopsTheSearch) {
  auto fb = std::make_shared<FakeBackend>();
  fb->devices = 3;
  fb->behaviour = [](const ops::Config& c) {
    FakeBehaviour b;
    b.ms = 1.0 + 0.01 * double(c.at("bm"));
    b.measure_sleep_s = 0.002;
    b.measure_faults = c.at("bm") == 64;
    return b;
  };
  TuneResult r = tune(space_of(8), fake_hooks(fb), quiet());
  EXPECT_FALSE(r.found);
  ASSERT_TRUE(r.device_fault);
  ASSERT_EQ(r.log.size(), 8u);
  for (const CandidateLog& c : r.log) {
    int64_t bm = c.config.at("bm");
    if (bm < 64) EXPECT_EQ(c.status, CandidateStatus::measured) << bm << ": " << c.reason;
    if (bm == 64) {
      EXPECT_EQ(c.status, CandidateStatus::run_failed);
      EXPECT_NE(c.reason.find("the GPU faulted running this config"), std::string::npos);
    }
    if (bm > 64) {
      EXPECT_EQ(c.status, CandidateStatus::skipped) << bm;
      EXPECT_EQ(c.reason, "not measured: the GPU context was lost when bm=64 faulted");
    }
  }
  EXPECT_THROW(rethrow_device_fault(r), DeviceFault);
}

TEST(MultiDeviceTuner, ACheckThatThrowsOnAWorkerFailsThatCandidate) {
  auto fb = std::make_shared<FakeBackend>();
  fb->devices = 2;
  fb->behaviour = [](const ops::Config& c) { return FakeBehaviour{.ms = 3.0 - 0.1 * c.at("bm")}; };
  TuneHooks h = fake_hooks(fb);
  auto real = h.check_correct;
  h.check_correct = [real](int d, const ops::Config& c, const CompiledCandidate& cc,
                           std::string* why) {
    if (c.at("bm") == 2) throw 7; // not even a std::exception
    return real(d, c, cc, why);
  };
  ConfigSpace s;
  for (int bm : {1, 2, 3}) {
    Candidate c;
    c.config = {{"bm", bm}};
    s.kept.push_back(c);
  }
  TuneResult r = tune(s, h, quiet());
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.best.at("bm"), 3);
  EXPECT_EQ(r.log[1].status, CandidateStatus::run_failed);
  EXPECT_EQ(r.log[1].reason, "check_correct threw a non-standard exception");
}

TEST(MultiDeviceTuner, MeasuringHooksWithNoDevicesIsAnError) {
  auto fb = std::make_shared<FakeBackend>();
  TuneHooks h = fake_hooks(fb);
  h.devices = 0;
  try {
    tune(space_of(2), h, quiet());
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("measure on 0 devices"), std::string::npos) << e.what();
  }
}

TEST(TuneDevices, EnvironmentValueIsACountFromOneToWhatIsThere) {
  EXPECT_EQ(tune_device_limit(nullptr, 3), 3);
  EXPECT_EQ(tune_device_limit("", 3), 3);
  EXPECT_EQ(tune_device_limit("1", 3), 1);
  EXPECT_EQ(tune_device_limit("3", 3), 3);
  EXPECT_EQ(tune_device_limit("5", -1), 5) << "only the syntax is checked without a GPU";
  for (const char* bad : {"0", "-1", "4", "two", "2x", " 2", "99999999999999999999"}) {
    try {
      tune_device_limit(bad, 3);
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const UserError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("TILEPILOT_TUNE_DEVICES='" + std::string(bad) + "' is not a device count"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("from 1 to 3"), std::string::npos) << m;
    }
  }
  try {
    tune_device_limit("0", -1);
    ADD_FAILURE() << "0 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("a whole number >= 1"), std::string::npos) << e.what();
  }
}

TEST(TuneDevices, TuneCommandExits2OnABadValue) {
  CliResult r = run_cli("tune gemm --shape M=64,N=64,K=64", "TILEPILOT_TUNE_DEVICES=0");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("TILEPILOT_TUNE_DEVICES='0' is not a device count"), std::string::npos)
      << r.out;
}

TEST(TuneDevices, CudaHooksRejectABadValueWithOrWithoutAGpu) {
  ::setenv("TILEPILOT_TUNE_DEVICES", "none", 1);
  const ops::Operator& gemm = ops::find_operator("gemm");
  ops::Problem p = gemm.parse({{"M", "64"}, {"N", "64"}, {"K", "64"}}, bf16);
  EXPECT_THROW(cuda_tune_hooks(gemm, p, "sm_90a"), UserError);
  ::unsetenv("TILEPILOT_TUNE_DEVICES");
  EXPECT_NO_THROW(cuda_tune_hooks(gemm, p, "sm_90a"));
}

namespace {

const ops::Operator& gemm() {
  return ops::find_operator("gemm");
}

// A small gemm search on the GPU: at most 6 kept configs.
ConfigSpace small_gemm_space(const ops::Problem& p, const std::string& arch) {
  std::vector<ops::Knob> knobs = restrict_space(knob_space(gemm(), arch), "stages=2|3");
  ConfigSpace space = enumerate(gemm(), p, TargetLimits::for_arch(arch), knobs);
  if (space.kept.size() > 6) space.kept.resize(6);
  return space;
}

// The candidates that compiled and measured without failing: which of them was early-stopped,
// measured or won depends on timings, but not whether they are in this set.
std::vector<std::string> valid_set(const TuneResult& r) {
  std::vector<std::string> out;
  for (const CandidateLog& c : r.log)
    if (c.status == CandidateStatus::best || c.status == CandidateStatus::measured ||
        c.status == CandidateStatus::early_stopped)
      out.push_back(ops::config_str(c.config));
  std::sort(out.begin(), out.end());
  return out;
}

void expect_valid_winner(const TuneResult& r, const ops::Problem& p) {
  ASSERT_TRUE(r.found) << to_json(r).dump(2);
  EXPECT_GT(r.best_measurement.median_ms(), 0);
  ops::CheckOptions co;
  co.config = r.best;
  co.seed = 99;
  EXPECT_TRUE(ops::check_cuda(gemm(), p, co).passed) << ops::config_str(r.best);
}

} // namespace

TEST(GpuMultiDeviceTuner, EveryVisibleGpuPicksAValidWinnerFromTheOneGpuValidSet) {
  if (tp::rt::device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::string arch = ops::device_arch();
  ops::Problem p = gemm().parse({{"M", "1024"}, {"N", "1024"}, {"K", "1024"}}, bf16);
  ConfigSpace space = small_gemm_space(p, arch);
  TuneHooks all = cuda_tune_hooks(gemm(), p, arch);
  ASSERT_TRUE(all.measure) << all.why_no_measure;
  EXPECT_GE(all.devices, 1);
  EXPECT_NE(all.devices_note.find("measuring on " + std::to_string(all.devices) + " GPU(s)"),
            std::string::npos)
      << all.devices_note;
  TuneHooks one = cuda_tune_hooks(gemm(), p, arch);
  one.devices = 1;
  TuneResult ra = tune(space, all, quiet());
  TuneResult r1 = tune(space, one, quiet());
  expect_valid_winner(ra, p);
  expect_valid_winner(r1, p);
  EXPECT_EQ(valid_set(ra), valid_set(r1));
  for (const CandidateLog& c : ra.log)
    EXPECT_NE(c.status, CandidateStatus::run_failed) << ops::config_str(c.config) << c.reason;
}

TEST(GpuMultiDeviceTuner, TwoWorkersTakingTurnsOnOneGpuPickAValidWinner) {
  // Two tuner worker threads share GPU 0 through a lock (so timings never overlap): the CUDA
  // hooks then run on threads other than the caller's, binding GPU 0's context there.
  if (tp::rt::device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::string arch = ops::device_arch();
  ops::Problem p = gemm().parse({{"M", "512"}, {"N", "512"}, {"K", "512"}}, bf16);
  TuneHooks real = cuda_tune_hooks(gemm(), p, arch);
  ASSERT_TRUE(real.measure) << real.why_no_measure;
  auto turn = std::make_shared<std::mutex>();
  TuneHooks two = real;
  two.devices = 2;
  two.measure = [real, turn](int, const ops::Config& c, const CompiledCandidate& cc, int n) {
    std::lock_guard<std::mutex> lock(*turn);
    return real.measure(0, c, cc, n);
  };
  two.check_correct = [real, turn](int, const ops::Config& c, const CompiledCandidate& cc,
                                   std::string* why) {
    std::lock_guard<std::mutex> lock(*turn);
    return real.check_correct(0, c, cc, why);
  };
  ConfigSpace space = small_gemm_space(p, arch);
  TuneResult r2 = tune(space, two, quiet());
  TuneResult r1 = tune(space, real, quiet());
  expect_valid_winner(r2, p);
  expect_valid_winner(r1, p);
  EXPECT_EQ(valid_set(r2), valid_set(r1));
}

TEST(GpuMultiDeviceTuner, TuneDevicesRestrictsTheGpusAndRejectsTooMany) {
  if (tp::rt::device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::string arch = ops::device_arch();
  ops::Problem p = gemm().parse({{"M", "256"}, {"N", "256"}, {"K", "256"}}, bf16);
  const int all = cuda_tune_hooks(gemm(), p, arch).devices;
  ::setenv("TILEPILOT_TUNE_DEVICES", "1", 1);
  EXPECT_EQ(cuda_tune_hooks(gemm(), p, arch).devices, 1);
  ::setenv("TILEPILOT_TUNE_DEVICES", std::to_string(all + 1).c_str(), 1);
  try {
    cuda_tune_hooks(gemm(), p, arch);
    ADD_FAILURE() << "more devices than there are accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("from 1 to " + std::to_string(all)), std::string::npos)
        << e.what();
  }
  ::unsetenv("TILEPILOT_TUNE_DEVICES");
}
