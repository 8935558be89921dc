// A pilot killed with SIGKILL at any point loses nothing and leaves nothing wrong behind: the
// output folder always holds one complete run (the earlier one, or the new one when the kill
// came after the final swap), never a report whose release/, repro/ or keep-framework record is
// missing or from another run; a later run sweeps what the killed one left beside it.
// Two writers are killed: the CLI (fork + exec, CPU interpreter) and the pilot library in a
// forked child with fake GPU backends, which writes a release/ folder.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "../pilot/PilotTestSupport.h"
#include "KillSupport.h"
#include "pilot/Pilot.h"
#include "pilot/Spec.h"
#include "release/ReleaseManifest.h"

namespace tp::pilot::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

/// "" when `dir` holds one complete pilot output, else what is inconsistent. `*decision` and
/// `*seed` (the spec's) say which run it came from.
std::string check_consistent(const fs::path& dir, std::string* decision, uint64_t* seed) {
  nlohmann::json rep;
  try {
    rep = read_json((dir / "report.json").string());
  } catch (const std::exception& e) {
    return std::string("report.json unreadable: ") + e.what();
  }
  *decision = rep["decision"].value("decision", "");
  *seed = rep["spec"].value("seed", uint64_t{0});
  for (const char* f : {"report.md", "report.html"})
    if (!fs::is_regular_file(dir / f)) return std::string(f) + " missing";
  bool keep = *decision == kKeepFramework, release = *decision == kRelease;
  if (keep != fs::exists(dir / "keep-framework.json")) return "keep-framework.json vs decision";
  if (keep != fs::exists(dir / "keep-framework.md")) return "keep-framework.md vs decision";
  if (release != fs::exists(dir / "release")) return "release/ vs decision " + *decision;
  if (release) {
    try {
      release::Release r =
          release::load_release((dir / "release").string()); // checks every listed hash
      if (r.manifest["spec"].value("seed", uint64_t{0}) != *seed) return "release from another run";
    } catch (const std::exception& e) {
      return std::string("release/ invalid: ") + e.what();
    }
  }
  bool repro = false;
  for (const auto& s : rep["stages"])
    if (s["name"] == "correctness" && s["data"].contains("repro")) repro = true;
  if (repro != fs::exists(dir / "repro" / "repro.json")) return "repro/ vs report";
  if (repro) {
    auto j = read_json((dir / "repro" / "repro.json").string());
    if (!j.contains("case")) return "repro.json has no case";
  }
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) return "temporary " + n;
  }
  return "";
}

size_t siblings(const fs::path& dir) {
  size_t n = 0;
  std::string prefix = "." + dir.filename().string() + ".tilepilot-";
  for (const auto& e : fs::directory_iterator(dir.parent_path()))
    n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

using tp::testing::run_or_kill;
using tp::testing::spawn;

struct KillStats {
  int killed = 0, finished = 0;
};

/// Alternates two specs (told apart by their seeds) into one folder, killing most runs at a
/// random point of a full run's duration; after every run the folder must be consistent and,
/// when the kill came before the swap, still the earlier run.
template <typename Launch, typename Expect>
/// Runs up to `rounds` launches, killing most at random points, until `want_kills` kills have
/// happened (the test's evidence) or `budget_s` has passed. Stopping at a kill count rather than
/// at a time keeps the evidence the same on a loaded machine, where each run is slower.
KillStats kill_loop(const fs::path& out, int rounds, int want_kills, double budget_s, Launch launch,
                    Expect expected_rc) {
  KillStats st;
  // A first, complete run: the result that must never be lost.
  auto t0 = Clock::now();
  pid_t pid = launch(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const auto full = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
  EXPECT_TRUE(WIFEXITED(status)) << "the first run did not finish";
  std::string decision;
  uint64_t seed = 0, prev_seed = 0;
  EXPECT_EQ(check_consistent(out, &decision, &prev_seed), "");
  std::mt19937 rng(12345);
  std::uniform_real_distribution<double> when(0.0, 1.1);
  auto start = Clock::now();
  auto full_us = full.count();
  for (int i = 1; i <= rounds; ++i) {
    if (st.killed >= want_kills) break;
    if (std::chrono::duration<double>(Clock::now() - start).count() > budget_s) break;
    // Every fifth run finishes: it must sweep the leftovers of the killed ones.
    bool finish = i % 5 == 0;
    auto after = finish ? std::chrono::microseconds(600'000'000)
                        : std::chrono::microseconds(static_cast<int64_t>(full_us * when(rng)));
    int rc = 0;
    auto r0 = Clock::now();
    bool killed = run_or_kill(launch(i), after, &rc);
    (killed ? st.killed : st.finished)++;
    // Kill points are drawn over the shortest complete run seen: a first run slowed by a loaded
    // machine (or a cold cache) would otherwise put most of them after the later runs end.
    if (!killed)
      full_us = std::min<int64_t>(
          full_us,
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - r0).count());
    // A run that finished after earlier ones were killed (mid cache write, mid release) is a
    // normal run: stale leftovers are rebuilt or swept, never trusted.
    if (!killed) EXPECT_EQ(rc, expected_rc(i)) << "run " << i;
    std::string why = check_consistent(out, &decision, &seed);
    EXPECT_EQ(why, "") << "after run " << i << (killed ? " (killed)" : "");
    if (!why.empty()) break;
    if (!killed) {
      EXPECT_EQ(siblings(out), 0u) << "a finished run left staging folders beside " << out;
    }
    prev_seed = seed;
  }
  return st;
}

/// A pilot spec that runs in a fraction of a second on the interpreter (no compile stage; a
/// failing one compiles its reproducer's kernel with NVRTC when NVRTC is here), seed 100 + i % 2.
std::string spec_with_seed(int i, const std::string& extra) {
  return R"(operator: gemm
device: sm_90a
dtypes: [bf16]
shapes:
  representative:
    - {M: 16, N: 16, K: 16, weight: 0.5}
    - {M: 32, N: 16, K: 16, weight: 0.5}
  edge:
    - {M: 7, N: 9, K: 13, layout: nt}
reference: framework
tolerance: {atol: 2e-2, rtol: 2e-2}
objective: {metric: weighted_latency, min_speedup: 1.1}
memory_limit_mb: 512
metrics: [correctness, warm, memory]
fallback: required
seed: )" +
         std::to_string(100 + i % 2) + "\n" + extra;
}

TEST(PilotKill, CliKilledAtRandomPointsKeepsTheFolderConsistent) {
  fs::path dir = scratch_dir();
  // Odd runs fail correctness (a reproducer and a keep-framework record), even ones do not.
  for (int k = 0; k < 2; ++k)
    release::write_text((dir / ("spec" + std::to_string(k) + ".yaml")).string(),
                        spec_with_seed(k, k ? "inject_fault: wrong_scale\n" : ""));
  fs::path out = dir / "out";
  fs::path cache = dir / "cache";
  auto launch = [&](int i) {
    std::string spec = (dir / ("spec" + std::to_string(i % 2) + ".yaml")).string();
    std::string o = out.string();
    // Now and then a cold kernel cache, so that kills also land in NVRTC compiles and cache
    // writes (the compile stage runs without a GPU when NVRTC is here).
    if (i % 7 == 3) fs::remove_all(cache);
    return spawn([&] {
      ::setenv("TILEPILOT_CACHE_DIR", cache.c_str(), 1);
      ::execl(TILEPILOT_CLI, TILEPILOT_CLI, "pilot", spec.c_str(), "--out", o.c_str(),
              "--no-progress", "--shrink-attempts", "4", static_cast<char*>(nullptr));
      ::_exit(127);
    });
  };
  KillStats st = kill_loop(out, 80, 20, 150.0, launch, [](int i) { return i % 2; });
  std::cout << "CLI pilot: " << st.killed << " kills, " << st.finished << " finished runs\n";
  EXPECT_GE(st.killed, 20);
}

TEST(PilotKill, ReleaseWriterKilledAtRandomPointsKeepsTheFolderConsistent) {
  fs::path dir = scratch_dir();
  fs::path out = dir / "out";
  auto launch = [&](int i) {
    return spawn([&] {
      PilotOptions o;
      o.out_dir = out.string();
      o.backends = FakeGpu{}.backends(); // twice as fast as the reference: a release
      o.progress = ProgressMode::off;
      run_pilot(parse_spec(spec_with_seed(i, ""), "kill.yaml"), o);
    });
  };
  KillStats st = kill_loop(out, 60, 20, 120.0, launch, [](int) { return 0; });
  std::cout << "release pilot: " << st.killed << " kills, " << st.finished << " finished runs\n";
  EXPECT_GE(st.killed, 20);
}

} // namespace
} // namespace tp::pilot::testing
