// The tuning database: exact-key lookups, corrupt entries ignored and reported once, and
// concurrent writers (processes and threads) leaving only complete entries, last writer winning
// and read-modify-write serialized by the lock.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "FakeHooks.h"
#include "autotune/TuningDb.h"

using namespace tp;
using namespace tp::autotune;
using tp::autotune::testing::fake_h200;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test, removed afterwards.
struct TempDir {
  std::string path;
  TempDir() {
    path = (fs::temp_directory_path() /
            ("tp-tunedb-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TuneKey key_for(int64_t M) {
  ops::Problem p = ops::find_operator("gemm").parse(
      {{"M", std::to_string(M)}, {"N", "256"}, {"K", "256"}}, bf16);
  return make_key(p, fake_h200(), "0.1.0");
}

DbEntry entry(const TuneKey& k, int64_t bm, int64_t stamp = 0) {
  DbEntry e;
  e.key = k;
  e.config = {{"bm", bm}, {"bn", 128}, {"stamp", stamp}};
  e.ms_median = 0.5;
  e.source = "test";
  return e;
}

struct Reports {
  std::vector<std::string> lines;
  TuningDb::Reporter fn() {
    return [this](const std::string& m) { lines.push_back(m); };
  }
};

void write_raw(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

} // namespace

TEST(TuningDb, RoundTripAndExactKeyOnly) {
  TempDir d;
  TuningDb db(d.path);
  EXPECT_FALSE(db.get(key_for(4096)));
  db.put(entry(key_for(4096), 128));
  auto e = db.get(key_for(3000)); // same bucket
  ASSERT_TRUE(e);
  EXPECT_EQ(e->config.at("bm"), 128);
  EXPECT_FALSE(e->written_at.empty());
  EXPECT_FALSE(db.get(key_for(8192))); // other bucket
  TuneKey other_gpu = key_for(4096);
  other_gpu.sm_count = 114;
  EXPECT_FALSE(db.get(other_gpu));
}

TEST(TuningDb, AFileHoldingAnotherKeyIsNotTrusted) {
  TempDir d;
  Reports rep;
  TuningDb db(d.path, rep.fn());
  db.put(entry(key_for(8192), 64));
  fs::copy_file(db.path_for(key_for(8192)), db.path_for(key_for(4096)));
  EXPECT_FALSE(db.get(key_for(4096)));
  ASSERT_EQ(rep.lines.size(), 1u);
  EXPECT_NE(rep.lines[0].find("its stored key differs"), std::string::npos) << rep.lines[0];
  EXPECT_EQ(db.list().size(), 1u); // the copy's name does not match its key
}

TEST(TuningDb, CorruptEntriesAreIgnoredReportedOnceAndReplaced) {
  TempDir d;
  Reports rep;
  TuningDb db(d.path, rep.fn());
  db.put(entry(key_for(256), 64)); // creates the directory
  const std::string good = db.get(key_for(256))->to_json().dump(2);
  const std::vector<std::pair<int64_t, std::string>> bad = {
      {512, ""},                                            // empty
      {1024, good.substr(0, good.size() / 2)},              // truncated
      {2048, "\x7f garbage \x01"},                          // not JSON
      {4096, "[1, 2, 3]"},                                  // JSON, not an entry
      {8192, R"({"format": 99, "key": {}, "config": {}})"}, // future format
  };
  for (const auto& [M, text] : bad)
    write_raw(db.path_for(key_for(M)), text);
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& [M, text] : bad)
      EXPECT_FALSE(db.get(key_for(M))) << M;
  EXPECT_EQ(rep.lines.size(), bad.size()) << "each file is reported once";
  for (const std::string& l : rep.lines)
    EXPECT_NE(l.find("the next tune of this key replaces it"), std::string::npos) << l;
  EXPECT_EQ(db.list().size(), 1u);
  db.put(entry(key_for(1024), 256));
  ASSERT_TRUE(db.get(key_for(1024)));
  EXPECT_EQ(db.get(key_for(1024))->config.at("bm"), 256);
}

TEST(TuningDb, UnwritableDirectoryIsAUserErrorSayingWhatToSet) {
  TuningDb db("/proc/tilepilot-no-such-dir/tune");
  try {
    db.put(entry(key_for(64), 64));
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("set TILEPILOT_TUNE_DB to a directory you can write"),
              std::string::npos)
        << e.what();
  }
}

TEST(TuningDb, DefaultDirectoryFollowsTheEnvironment) {
  ::setenv("TILEPILOT_TUNE_DB", "/tmp/tp-tune-env-test", 1);
  EXPECT_EQ(TuningDb::default_dir(), "/tmp/tp-tune-env-test");
  ::unsetenv("TILEPILOT_TUNE_DB");
  if (const char* home = std::getenv("HOME"))
    EXPECT_EQ(TuningDb::default_dir(), std::string(home) + "/.cache/tilepilot/tune");
}

// Processes write their own keys, one shared key, and increment a shared counter under update().
TEST(TuningDb, ConcurrentProcessesLeaveCompleteEntriesLastWriterWinsAndLockedUpdates) {
  TempDir d;
  constexpr int kProcs = 6, kRounds = 40;
  const TuneKey shared = key_for(4096), counter = key_for(64);
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        TuningDb db(d.path, [](const std::string&) {});
        for (int r = 0; r < kRounds; ++r) {
          db.put(entry(key_for(1 + p), 64, r)); // own key
          db.put(entry(shared, 100 + p, r));    // same key as everyone
          db.update(counter, [&](const std::optional<DbEntry>& cur) {
            int64_t n = cur ? cur->config.at("stamp") : 0;
            return std::optional<DbEntry>(entry(counter, 64, n + 1));
          });
        }
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(k, &status, 0), k);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  Reports rep;
  TuningDb db(d.path, rep.fn());
  std::vector<DbEntry> all = db.list();
  EXPECT_EQ(all.size(), static_cast<size_t>(kProcs + 2));
  EXPECT_TRUE(rep.lines.empty()) << rep.lines.front();
  for (int p = 0; p < kProcs; ++p) {
    auto e = db.get(key_for(1 + p));
    ASSERT_TRUE(e);
    EXPECT_EQ(e->config.at("stamp"), kRounds - 1);
  }
  // Whoever wrote last, it was that writer's last write: no stale temp file landed late.
  auto s = db.get(shared);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->config.at("stamp"), kRounds - 1);
  EXPECT_GE(s->config.at("bm"), 100);
  EXPECT_LT(s->config.at("bm"), 100 + kProcs);
  EXPECT_EQ(db.get(counter)->config.at("stamp"), kProcs * kRounds) << "a lost update";
  for (const auto& f : fs::directory_iterator(d.path))
    EXPECT_EQ(f.path().filename().string().find(".tmp."), std::string::npos) << f.path();
}

TEST(TuningDb, ConcurrentThreadsSerializeOnTheSameLock) {
  TempDir d;
  constexpr int kThreads = 4, kRounds = 50;
  const TuneKey counter = key_for(64);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&] {
      TuningDb db(d.path);
      for (int r = 0; r < kRounds; ++r)
        db.update(counter, [&](const std::optional<DbEntry>& cur) {
          return std::optional<DbEntry>(entry(counter, 64, cur ? cur->config.at("stamp") + 1 : 1));
        });
    });
  for (auto& t : ts)
    t.join();
  EXPECT_EQ(TuningDb(d.path).get(counter)->config.at("stamp"), kThreads * kRounds);
}

TEST(TuningDb, SequentialWritesLastOneWins) {
  TempDir d;
  TuningDb db(d.path);
  db.put(entry(key_for(512), 64));
  db.put(entry(key_for(512), 256));
  EXPECT_EQ(db.get(key_for(512))->config.at("bm"), 256);
  EXPECT_FALSE(db.update(key_for(512), [](const auto&) { return std::nullopt; }));
  EXPECT_EQ(db.get(key_for(512))->config.at("bm"), 256);
}
