// The on-disk kernel cache: round trips, rejects and removes every kind of damaged entry, writes
// atomically, and keys on every input that determines the cubin.
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <set>
#include <sys/stat.h>
#include <thread>

#include "RuntimeTestUtil.h"
#include "runtime/DeviceHeaders.h"
#include "runtime/KernelCache.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::rt;
namespace fs = std::filesystem;

namespace {

CompileOutput sample_output() {
  CompileOutput out;
  out.ptx = ".version 9.0\n.target sm_90a\n";
  for (int i = 0; i < 1000; ++i)
    out.cubin.push_back(char(i * 7));
  out.log = "ptxas info    : Used 8 registers\n";
  out.seconds = 0.125;
  return out;
}

std::string some_key(const std::string& ir = "kernel k { }") {
  return cache_key(ir, "sm_90a", {});
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  return out;
}

/// Rewrites the entry file with `edit` applied to its bytes.
template <typename F>
void damage(const std::string& path, F edit) {
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  edit(bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

} // namespace

TEST(KernelCache, StoreThenLookupRoundTrips) {
  test::TempDir dir;
  KernelCache cache(dir.str() + "/nested/cache");
  std::string key = some_key();
  EXPECT_FALSE(cache.lookup(key));
  CompileOutput in = sample_output();
  cache.store(key, in);
  auto out = cache.lookup(key);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->ptx, in.ptx);
  EXPECT_EQ(out->cubin, in.cubin);
  EXPECT_EQ(out->log, in.log);
  EXPECT_EQ(out->seconds, in.seconds);
  EXPECT_EQ(cache.corrupt_entries(), 0);
}

TEST(KernelCache, EmptyPayloadRoundTrips) {
  test::TempDir dir;
  KernelCache cache(dir.str());
  cache.store(some_key(), CompileOutput{});
  auto out = cache.lookup(some_key());
  ASSERT_TRUE(out);
  EXPECT_TRUE(out->cubin.empty() && out->ptx.empty() && out->log.empty());
}

TEST(KernelCache, DamagedEntriesAreDetectedRemovedAndReportedOnce) {
  struct Case {
    const char* what;
    std::function<void(std::string&)> edit;
  };
  std::vector<Case> cases = {
      {"flipped payload byte", [](std::string& b) { b[b.size() / 2] ^= 0x20; }},
      {"flipped header byte (seconds)", [](std::string& b) { b[72] ^= 1; }},
      {"truncated payload", [](std::string& b) { b.resize(b.size() - 10); }},
      {"truncated header", [](std::string& b) { b.resize(20); }},
      {"extended", [](std::string& b) { b += "junk"; }},
      {"bad magic", [](std::string& b) { b[0] = 'X'; }},
      {"empty file", [](std::string& b) { b.clear(); }},
  };
  test::TempDir dir;
  KernelCache cache(dir.str());
  testing::internal::CaptureStderr();
  int n = 0;
  for (const Case& c : cases) {
    std::string key = some_key(c.what);
    cache.store(key, sample_output());
    damage(cache.entry_path(key), c.edit);
    EXPECT_FALSE(cache.lookup(key)) << c.what;
    EXPECT_FALSE(fs::exists(cache.entry_path(key))) << c.what << ": entry not removed";
    EXPECT_EQ(cache.corrupt_entries(), ++n);
    // Rebuilt: the next store is trusted again.
    cache.store(key, sample_output());
    EXPECT_TRUE(cache.lookup(key)) << c.what;
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("is invalid (checksum mismatch)"), std::string::npos) << err;
  EXPECT_NE(err.find("recompiling"), std::string::npos) << err;
  size_t first = err.find("tilepilot: warning:");
  EXPECT_EQ(err.find("tilepilot: warning:", first + 1), std::string::npos)
      << "warned more than once:\n"
      << err;
}

TEST(KernelCache, EntryForAnotherKeyIsRejected) {
  test::TempDir dir;
  KernelCache cache(dir.str());
  std::string a = some_key("a"), b = some_key("b");
  cache.store(a, sample_output());
  fs::rename(cache.entry_path(a), cache.entry_path(b));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.lookup(b));
  EXPECT_NE(testing::internal::GetCapturedStderr().find("key mismatch"), std::string::npos);
}

TEST(KernelCache, WritesLeaveNoTemporaryFiles) {
  test::TempDir dir;
  KernelCache cache(dir.str());
  std::string key = some_key();
  // Concurrent writers of one key: each writes its own temporary file and renames it.
  std::vector<std::thread> writers;
  for (int i = 0; i < 8; ++i)
    writers.emplace_back([&] { cache.store(key, sample_output()); });
  for (auto& t : writers)
    t.join();
  EXPECT_EQ(files_in(dir.str()), std::vector<std::string>{key + ".tpk"});
  EXPECT_TRUE(cache.lookup(key));
}

TEST(KernelCache, UnwritableDirectoryWarnsOnceAndDoesNotThrow) {
  KernelCache cache("/dev/null/not-a-dir");
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(cache.store(some_key("x"), sample_output()));
  EXPECT_NO_THROW(cache.store(some_key("y"), sample_output()));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot write the kernel cache in /dev/null/not-a-dir"), std::string::npos)
      << err;
  EXPECT_EQ(err.find("tilepilot: warning:", err.find("tilepilot: warning:") + 1), std::string::npos)
      << err;
  EXPECT_FALSE(cache.lookup(some_key("x")));
}

TEST(KernelCache, DisabledCacheNeitherStoresNorFinds) {
  test::TempDir dir;
  KernelCache cache(dir.str(), /*enabled=*/false);
  cache.store(some_key(), sample_output());
  EXPECT_FALSE(cache.lookup(some_key()));
  EXPECT_TRUE(files_in(dir.str()).empty());
}

TEST(KernelCache, KeyChangesWhenAnyInputChanges) {
  auto key = [](std::string ir, std::string arch, std::vector<std::string> opts,
                std::string lib = "lib1", std::string nvrtc = "13.0") {
    return cache_key_for_versions(ir, arch, opts, lib, nvrtc);
  };
  std::string base = key("ir", "sm_90a", {"-lineinfo", "-O3"});
  EXPECT_EQ(base.size(), 32u);
  EXPECT_EQ(base, key("ir", "sm_90a", {"-lineinfo", "-O3"})); // deterministic
  std::set<std::string> all = {
      base,
      key("ir2", "sm_90a", {"-lineinfo", "-O3"}),
      key("ir", "sm_80", {"-lineinfo", "-O3"}),
      key("ir", "sm_90a", {"-lineinfo"}),
      key("ir", "sm_90a", {"-O3", "-lineinfo"}),
      key("ir", "sm_90a", {"-lineinfo", "-O3"}, "lib2"),
      key("ir", "sm_90a", {"-lineinfo", "-O3"}, "lib1", "12.8"),
      // Field boundaries are part of the key.
      key("irsm_90a", "", {"-lineinfo", "-O3"}),
      key("ir", "sm_90a", {"-lineinfo-O3"}),
  };
  EXPECT_EQ(all.size(), 9u);
  // The public form uses the current device library and NVRTC versions.
  EXPECT_EQ(cache_key("ir", "sm_90a", {}),
            cache_key_for_versions("ir", "sm_90a", {}, device_library_version(), nvrtc_version()));
}

TEST(KernelCache, RejectsMalformedKeys) {
  KernelCache cache("/tmp");
  EXPECT_THROW(cache.entry_path("../../etc/passwd"), InternalError);
  EXPECT_THROW(cache.lookup("ABC"), InternalError);
}

TEST(KernelCache, DefaultDirectoryFollowsEnvironment) {
  test::ScopedEnv home("HOME", "/home/u");
  {
    test::ScopedEnv dir("TILEPILOT_CACHE_DIR", "/x/cache"), xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(default_cache_dir(), "/x/cache");
  }
  {
    test::ScopedEnv dir("TILEPILOT_CACHE_DIR", nullptr), xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(default_cache_dir(), "/xdg/tilepilot");
  }
  test::ScopedEnv dir("TILEPILOT_CACHE_DIR", nullptr), xdg("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(default_cache_dir(), "/home/u/.cache/tilepilot");
}

TEST(KernelCache, AFifoOrAFolderInAnEntrysPlaceIsRemovedNotOpened) {
  // Opening a FIFO would block this test forever; the cache must stat it and rebuild instead.
  test::TempDir dir;
  KernelCache cache(dir.str());
  std::string key = some_key("kernel fifo { }");
  cache.store(key, sample_output());
  std::string path = dir.str() + "/" + key + ".tpk";
  fs::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  EXPECT_FALSE(cache.lookup(key));
  EXPECT_FALSE(fs::exists(fs::symlink_status(path)));
  EXPECT_EQ(cache.corrupt_entries(), 1);
  // A folder where the entry belongs: removed, and the next store works again.
  fs::create_directories(path + "/inside");
  EXPECT_FALSE(cache.lookup(key));
  cache.store(key, sample_output());
  EXPECT_TRUE(cache.lookup(key));
  EXPECT_EQ(cache.corrupt_entries(), 2);
}
