// The on-disk stores killed with SIGKILL at random points lose nothing and trust nothing wrong:
//  - the tuning database, written by adaptive tuning (fake GPU hooks, one new problem per
//    search, so every search ends in a database write and a telemetry line): every entry that
//    reads back is a complete winner of its own key, and every telemetry record is a line of
//    its own (a killed append may leave a cut line, never glued to the next record);
//  - the kernel cache, written with large entries: a lookup returns an entry exactly as stored
//    for its key, or misses (a damaged entry is removed and recompiled by the caller).
// Either way the temporary files of killed writers are swept by the next writer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "FakeHooks.h"
#include "KillSupport.h"
#include "autotune/Policy.h"
#include "autotune/TuningDb.h"
#include "runtime/KernelCache.h"

using namespace tp;
using namespace tp::autotune;
using namespace tp::autotune::testing;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::temp_directory_path() / ("tp-kill-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

/// Temporary files left in `dir`, made old enough for the sweep's age margin first.
int temps_after_aging(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(".tmp", 0) != 0) continue;
    fs::last_write_time(e.path(), fs::file_time_type::clock::now() - std::chrono::minutes(5));
    ++n;
  }
  return n;
}

int temps(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().rfind(".tmp", 0) == 0;
  return n;
}

const ops::Operator& gemm() {
  return ops::find_operator("gemm");
}

const ops::Config kFast{{"bm", 128},      {"bn", 192},    {"bk", 64},     {"stages", 3},
                        {"threads", 256}, {"swizzle", 8}, {"cluster", 1}, {"persistent", 0},
                        {"splits", 1},    {"gemv", 0},    {"swap_ab", 0}, {"pad_k", 0}};

Policy adaptive(const fs::path& dir) {
  auto fb = std::make_shared<FakeBackend>();
  fb->behaviour = [](const ops::Config& c) { return FakeBehaviour{.ms = c == kFast ? 0.5 : 1.0}; };
  Policy p;
  p.kind = PolicyKind::adaptive;
  p.db_dir = (dir / "db").string();
  p.telemetry_path = (dir / "telemetry.jsonl").string();
  p.hooks = fake_hooks(fb);
  p.tune.progress = TuneOptions::Progress::off;
  p.tune.full_iters = 3;
  return p;
}

/// Searches problems M = first, first + 64, ... (each its own tuning key) until killed.
void tune_forever(const fs::path& dir, int first) {
  Policy p = adaptive(dir);
  for (int64_t M = first;; M += 64)
    choose_config(p, gemm(),
                  gemm().parse({{"M", std::to_string(M)}, {"N", "4096"}, {"K", "4096"}}, bf16),
                  fake_h200());
}

/// How long `body` takes, in microseconds.
template <typename F>
int64_t micros(F body) {
  auto t0 = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

/// Kills children that run `loop(i)` at uniformly random points of [0.05, 2.5] x `unit_us`
/// (one unit of their work), until 25 kills and `enough()`; returns the kills. A child slower
/// than the unit measured (a loaded machine) may be killed before it finishes anything: every
/// 10 children without `enough()` double the unit.
template <typename Loop, typename Enough>
int kill_at_random_points(int64_t unit_us, uint32_t seed, Loop loop, Enough enough) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> when(0.05, 2.5);
  int kills = 0;
  for (int i = 0; i < 100 && (kills < 25 || !enough()); ++i) {
    if (i > 0 && i % 10 == 0 && !enough()) unit_us *= 2;
    int rc = 0;
    kills += tp::testing::run_or_kill(
        tp::testing::spawn([&] { loop(i); }),
        std::chrono::microseconds(static_cast<int64_t>(unit_us * when(rng))), &rc);
  }
  return kills;
}

/// How often `needle` occurs in `s`.
int occurrences(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1))
    ++n;
  return n;
}

TEST(StoreKill, TuningDatabaseKilledWhileTuningKeepsOnlyWholeWinners) {
  TempDir d("tune"), timing("tune-timing");
  const int64_t search_us = micros([&] {
    choose_config(adaptive(timing.path), gemm(),
                  gemm().parse({{"M", "4096"}, {"N", "4096"}, {"K", "4096"}}, bf16), fake_h200());
  });
  auto searched = [&] { return !TuningDb((d.path / "db").string()).list().empty(); };
  int kills = kill_at_random_points(
      search_us, 7, [&](int i) { tune_forever(d.path, 1 + 64 * 1000 * i); }, searched);
  EXPECT_GE(kills, 25);
  // Every entry that reads back is the winner of its own key (the reader checks the key).
  std::vector<DbEntry> entries = TuningDb((d.path / "db").string()).list();
  EXPECT_GT(entries.size(), 0u) << "no search finished between kills: the test proves nothing";
  for (const DbEntry& e : entries) {
    EXPECT_EQ(e.config, kFast) << e.key.canonical();
    EXPECT_DOUBLE_EQ(e.ms_median, 0.5) << e.key.canonical();
    EXPECT_DOUBLE_EQ(e.default_ms_median, 1.0) << e.key.canonical();
  }
  // Telemetry: a writer killed inside its append may leave a cut line, but every record
  // begins a line of its own, so a cut line never swallows the next writer's record.
  std::ifstream in(d.path / "telemetry.jsonl");
  int whole = 0, cut = 0, line = 0;
  for (std::string l; std::getline(in, l); ++line) {
    nlohmann::json::accept(l) ? ++whole : ++cut;
    EXPECT_LE(occurrences(l, "\"policy\":\"adaptive\""), 1)
        << "telemetry line " << line << " holds two records";
  }
  EXPECT_GE(whole, static_cast<int>(entries.size())) << "a search's record is missing";
  EXPECT_LE(cut, kills);
  // The next writer sweeps what the killed ones left.
  // Kills rarely land inside these small writes: leave one orphan of a finished process too.
  int rc = 0;
  pid_t gone = tp::testing::spawn([] {});
  tp::testing::run_or_kill(gone, std::chrono::seconds(30), &rc);
  std::ofstream(d.path / "db" / (".tmp." + std::to_string(gone) + ".0.json")) << "{\"cut";
  std::cout << kills << " kills, " << temps_after_aging(d.path / "db")
            << " temporary files left by them, " << entries.size() << " entries, " << cut
            << " cut telemetry lines\n";
  Policy p = adaptive(d.path);
  Choice c = choose_config(
      p, gemm(), gemm().parse({{"M", "7"}, {"N", "4096"}, {"K", "4096"}}, bf16), fake_h200());
  EXPECT_EQ(c.source, "tuned") << c.reason;
  EXPECT_EQ(temps(d.path / "db"), 0);
}

/// A deterministic payload of `n` bytes for (key index, version).
std::vector<char> payload(int key, int version, size_t n) {
  std::vector<char> v(n);
  std::mt19937 rng(key * 1000 + version);
  for (char& c : v)
    c = static_cast<char>(rng());
  return v;
}

std::string key_of(int k) {
  return rt::cache_key("kernel " + std::to_string(k), "sm_90a", {});
}

TEST(StoreKill, KernelCacheKilledMidStoreReturnsWholeEntriesOrMisses) {
  TempDir d("cache");
  constexpr int kKeys = 4;
  constexpr size_t kBytes = 4 << 20; // large, so kills land inside writes
  auto store = [&](rt::KernelCache& cache, int v, int version) {
    rt::CompileOutput out;
    out.cubin = payload(v % kKeys, version, kBytes);
    out.log = "version " + std::to_string(version);
    cache.store(key_of(v % kKeys), out);
  };
  TempDir timing("cache-timing");
  rt::KernelCache timing_cache(timing.path.string());
  const int64_t store_us = micros([&] { store(timing_cache, 0, 0); });
  int kills = kill_at_random_points(
      store_us, 11,
      [&](int i) {
        rt::KernelCache cache(d.path.string());
        for (int v = 0;; ++v)
          store(cache, v, i);
      },
      [] { return true; });
  EXPECT_GE(kills, 25);
  rt::KernelCache cache(d.path.string());
  int hits = 0;
  for (int k = 0; k < kKeys; ++k) {
    std::optional<rt::CompileOutput> got = cache.lookup(key_of(k));
    if (!got) continue;
    ++hits;
    // Whole: the payload of the version its log names, byte for byte.
    ASSERT_EQ(got->log.rfind("version ", 0), 0u);
    int version = std::stoi(got->log.substr(8));
    EXPECT_EQ(got->cubin, payload(k, version, kBytes)) << "key " << k;
  }
  EXPECT_GT(hits, 0) << "no store finished between kills: the test proves nothing";
  std::cout << kills << " kills, " << temps_after_aging(d.path)
            << " temporary files left by them\n";
  rt::CompileOutput out;
  out.cubin = payload(0, 99, 16);
  cache.store(key_of(0), out);
  EXPECT_EQ(temps(d.path), 0);
}

} // namespace
