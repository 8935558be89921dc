// sweep_orphan_temps removes exactly the temporary files no live writer can still rename: a dead
// writer's file once past the age margin, any temporary file older than a day; it keeps a live
// writer's file, a dead writer's fresh file (another host may share the folder) and every file
// that is not a temporary one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/TempFiles.h"

namespace fs = std::filesystem;

namespace {

pid_t finished_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

void touch(const fs::path& p, std::chrono::seconds age) {
  std::ofstream(p) << "x";
  fs::last_write_time(p, fs::file_time_type::clock::now() - age);
}

TEST(TempFiles, SweepRemovesOnlyOrphans) {
  fs::path dir = fs::temp_directory_path() / ("tp-temps-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string dead = std::to_string(finished_pid());
  const std::string live = std::to_string(::getppid()); // our parent outlives this test
  using std::chrono::seconds;
  touch(dir / (".tmp." + dead + ".0.json"), seconds(60));        // orphan: removed
  touch(dir / (".tmp-abc123-" + dead + "-4"), seconds(60));      // orphan, old naming: removed
  touch(dir / (".tmp." + dead + ".1.json"), seconds(0));         // too fresh: kept
  touch(dir / (".tmp." + live + ".2.json"), seconds(60));        // live writer: kept
  touch(dir / (".tmp." + live + ".3.json"), seconds(2 * 86400)); // older than a day: removed
  touch(dir / "entry.json", seconds(3 * 86400));                 // not temporary: kept
  touch(dir / ".tmp.notapid.json", seconds(3 * 86400));          // not our naming: kept
  EXPECT_EQ(tp::rt::sweep_orphan_temps(dir.string()), 3);
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(dir))
    left.insert(e.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{".tmp." + dead + ".1.json", ".tmp." + live + ".2.json",
                                         "entry.json", ".tmp.notapid.json"}));
  EXPECT_EQ(tp::rt::temp_path("/d", "k").rfind("/d/.tmp." + std::to_string(::getpid()) + ".", 0),
            0u);
  fs::remove_all(dir);
}

} // namespace
