// Policy choice in every branch: pinned (hit, miss, rejected entry, never tunes), adaptive (tune
// and store, then hit the database; no hooks; no measure; nothing correct; stale entry), the
// registered default hooks, pinned-table loading, and the telemetry lines.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "FakeHooks.h"
#include "autotune/Policy.h"
#include "autotune/TuningDb.h"
#include "tilepilot/device_error.h"

using namespace tp;
using namespace tp::autotune;
using namespace tp::autotune::testing;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    path = (fs::temp_directory_path() /
            ("tp-policy-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

const ops::Operator& gemm() {
  return ops::find_operator("gemm");
}

ops::Problem problem(int64_t M = 4096) {
  return gemm().parse({{"M", std::to_string(M)}, {"N", "4096"}, {"K", "4096"}}, bf16);
}

const ops::Config kTuned{{"bm", 128},      {"bn", 192},    {"bk", 64},     {"stages", 3},
                         {"threads", 256}, {"swizzle", 8}, {"cluster", 1}, {"persistent", 0},
                         {"splits", 1},    {"gemv", 0},    {"swap_ab", 0}, {"pad_k", 0}};

// Fake timings that make kTuned the fastest of the sm_90a gemm space.
std::shared_ptr<FakeBackend> fake_gpu() {
  auto fb = std::make_shared<FakeBackend>();
  fb->behaviour = [](const ops::Config& c) { return FakeBehaviour{.ms = c == kTuned ? 0.5 : 1.0}; };
  return fb;
}

Policy adaptive(const TempDir& d, std::optional<TuneHooks> hooks) {
  Policy p;
  p.kind = PolicyKind::adaptive;
  p.db_dir = d.path + "/db";
  p.telemetry_path = d.path + "/telemetry.jsonl";
  p.hooks = std::move(hooks);
  p.tune.progress = TuneOptions::Progress::off;
  p.tune.full_iters = 3;
  return p;
}

std::vector<nlohmann::json> telemetry(const TempDir& d) {
  std::vector<nlohmann::json> out;
  std::ifstream in(d.path + "/telemetry.jsonl");
  for (std::string line; std::getline(in, line);)
    out.push_back(nlohmann::json::parse(line));
  return out;
}

} // namespace

TEST(Policy, PinnedHitUsesTheTable) {
  Policy p;
  p.pinned.add(make_key(problem(), fake_h200()), kTuned);
  Choice c = choose_config(p, gemm(), problem(3000), fake_h200()); // same bucket
  EXPECT_EQ(c.source, "pinned");
  EXPECT_EQ(c.config, kTuned);
}

TEST(Policy, PinnedMissUsesTheDefaultAndNeverTunesOrReadsTheDb) {
  TempDir d;
  auto fb = fake_gpu();
  Policy p = adaptive(d, fake_hooks(fb));
  TuningDb(p.db_dir).put({make_key(problem(), fake_h200()), kTuned});
  p.kind = PolicyKind::pinned;
  p.pinned.add(make_key(problem(8192), fake_h200()), kTuned); // another bucket
  Choice c = choose_config(p, gemm(), problem(), fake_h200());
  EXPECT_EQ(c.source, "default");
  EXPECT_EQ(c.config, gemm().default_config(problem(), "sm_90a"));
  EXPECT_EQ(c.reason.find("no pinned config for op=gemm|dtype=bf16|shape.K=4096"), 0u) << c.reason;
  EXPECT_EQ(fb->compiles, 0);
  EXPECT_TRUE(telemetry(d).empty()) << "pinned choices are not telemetry";
}

TEST(Policy, PinnedEntryTheOperatorRejectsFallsBackToDefault) {
  Policy p;
  p.pinned.add(make_key(problem(), fake_h200()), {{"bm", 100}});
  Choice c = choose_config(p, gemm(), problem(), fake_h200());
  EXPECT_EQ(c.source, "default");
  EXPECT_NE(c.reason.find("the pinned config bm=100 is rejected"), std::string::npos) << c.reason;
}

TEST(Policy, AdaptiveTunesOnFirstUseThenHitsTheDb) {
  TempDir d;
  auto fb = fake_gpu();
  Policy p = adaptive(d, fake_hooks(fb));
  Choice first = choose_config(p, gemm(), problem(), fake_h200());
  EXPECT_EQ(first.source, "tuned") << first.reason;
  EXPECT_EQ(first.config, kTuned);
  EXPECT_NE(first.reason.find("vs default 1 ms"), std::string::npos) << first.reason;
  int compiles = fb->compiles;
  EXPECT_GT(compiles, 0);
  auto stored = TuningDb(p.db_dir).get(make_key(problem(), fake_h200()));
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->config, kTuned);
  EXPECT_DOUBLE_EQ(stored->default_ms_median, 1.0);

  Choice again = choose_config(p, gemm(), problem(2500), fake_h200()); // same bucket
  EXPECT_EQ(again.source, "db");
  EXPECT_EQ(again.config, kTuned);
  EXPECT_EQ(fb->compiles, compiles) << "a database hit must not tune";

  auto lines = telemetry(d);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["source"], "tuned");
  EXPECT_GT(lines[0]["tune"]["candidates"].size(), 0u);
  EXPECT_TRUE(lines[0]["tune"]["candidates"][0].contains("compile_s"));
  EXPECT_EQ(lines[1]["source"], "db");
  EXPECT_EQ(lines[1]["key"]["shape"]["M"], 4096);
}

TEST(Policy, AdaptiveDoesNotTrustAnotherDevicesEntry) {
  TempDir d;
  auto fb = fake_gpu();
  Policy p = adaptive(d, fake_hooks(fb));
  rt::DeviceInfo h100 = fake_h200();
  h100.name = "Fake H100 (test)";
  TuningDb(p.db_dir).put({make_key(problem(), h100),
                          {{"bm", 64}, {"bn", 64}, {"bk", 64}, {"stages", 2}, {"threads", 128}}});
  Choice c = choose_config(p, gemm(), problem(), fake_h200());
  EXPECT_EQ(c.source, "tuned");
  EXPECT_EQ(c.config, kTuned);
}

TEST(Policy, AdaptiveWithoutHooksOrMeasureUsesTheDefaultAndSaysWhy) {
  TempDir d;
  set_default_hooks(nullptr);
  Choice none = choose_config(adaptive(d, std::nullopt), gemm(), problem(), fake_h200());
  EXPECT_EQ(none.source, "default");
  EXPECT_EQ(none.reason, "not tuned: no tuning hooks registered (the CUDA backend registers them)");
  TuneHooks compile_only = fake_hooks(fake_gpu());
  compile_only.measure = nullptr;
  compile_only.why_no_measure = "no CUDA driver: libcuda.so.1 not found";
  Choice c = choose_config(adaptive(d, compile_only), gemm(), problem(), fake_h200());
  EXPECT_EQ(c.source, "default");
  EXPECT_EQ(c.reason, "not tuned: no CUDA driver: libcuda.so.1 not found");
  EXPECT_EQ(telemetry(d).size(), 2u);
}

TEST(Policy, AdaptiveWithNothingCorrectStoresNothing) {
  TempDir d;
  auto fb = std::make_shared<FakeBackend>();
  fb->behaviour = [](const ops::Config&) { return FakeBehaviour{.wrong = true}; };
  Policy p = adaptive(d, fake_hooks(fb));
  p.tune.budget_seconds = 5;
  Choice c = choose_config(p, gemm(), problem(), fake_h200());
  EXPECT_EQ(c.source, "default");
  EXPECT_EQ(c.reason.find("tuning found no correct candidate ("), 0u) << c.reason;
  EXPECT_FALSE(TuningDb(p.db_dir).get(make_key(problem(), fake_h200())));
}

TEST(Policy, AdaptiveStopsAtAGpuFaultAndStoresNothing) {
  TempDir d;
  auto fb = std::make_shared<FakeBackend>();
  fb->behaviour = [](const ops::Config& c) {
    return FakeBehaviour{.ms = c == kTuned ? 0.5 : 1.0, .measure_faults = c == kTuned};
  };
  Policy p = adaptive(d, fake_hooks(fb));
  EXPECT_THROW(choose_config(p, gemm(), problem(), fake_h200()), DeviceFault);
  EXPECT_FALSE(TuningDb(p.db_dir).get(make_key(problem(), fake_h200())))
      << "configs measured before the fault are not stored either";
}

TEST(Policy, AdaptiveUsesTheRegisteredDefaultHooks) {
  TempDir d;
  auto fb = fake_gpu();
  std::string seen_arch;
  set_default_hooks(
      [fb, &seen_arch](const ops::Operator&, const ops::Problem&, const std::string& arch) {
        seen_arch = arch;
        return fake_hooks(fb);
      });
  Choice c = choose_config(adaptive(d, std::nullopt), gemm(), problem(), fake_h200());
  set_default_hooks(nullptr);
  EXPECT_EQ(c.source, "tuned");
  EXPECT_EQ(seen_arch, "sm_90a");
}

TEST(Policy, PinnedTableLoadsFromJsonFileAndReleaseFolders) {
  TempDir d;
  PinnedTable t;
  t.add(make_key(problem(), fake_h200()), kTuned);
  std::ofstream(d.path + "/pins.json") << t.to_json().dump(2);
  EXPECT_EQ(PinnedTable::load(d.path + "/pins.json").size(), 1u);
  fs::create_directories(d.path + "/release");
  std::ofstream(d.path + "/release/pinned_configs.json") << t.to_json().dump(2);
  PinnedTable from_release = PinnedTable::load(d.path + "/release");
  const ops::Config* c = from_release.find(make_key(problem(), fake_h200()));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(*c, kTuned);
  // A folder of tuning-database entries is a pinned table too.
  TuningDb(d.path + "/entries").put({make_key(problem(), fake_h200()), kTuned});
  EXPECT_EQ(PinnedTable::load(d.path + "/entries").size(), 1u);
}

TEST(Policy, MalformedPinnedTableIsAUserErrorNamingTheFile) {
  TempDir d;
  std::ofstream(d.path + "/bad.json") << R"({"format": 1, "entries": [{"config": {}}]})";
  try {
    PinnedTable::load(d.path + "/bad.json");
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    EXPECT_EQ(reason_text(e), "pinned configs: " + d.path + "/bad.json entry 0: no \"key\"");
  }
  std::ofstream(d.path + "/trunc.json") << R"({"format": 1, "entr)";
  try {
    PinnedTable::load(d.path + "/trunc.json");
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("trunc.json is not valid JSON"), std::string::npos);
  }
}

// A writer killed inside its append leaves a line without its newline: the next record starts
// a line of its own rather than continuing the cut one.
TEST(Policy, TelemetryRecordAfterACutLineIsALineOfItsOwn) {
  TempDir d;
  std::ofstream(d.path + "/telemetry.jsonl") << "{\"policy\":\"adaptive\",\"key\":{\"op";
  Policy p = adaptive(d, fake_hooks(fake_gpu()));
  choose_config(p, gemm(), problem(), fake_h200());
  std::ifstream in(d.path + "/telemetry.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "{\"policy\":\"adaptive\",\"key\":{\"op");
  EXPECT_EQ(nlohmann::json::parse(lines[1])["source"], "tuned");
}
