// The pilot's output folder: a run replaces an earlier pilot output only when it finishes,
// refuses a folder with other files unless --force, refuses a regular file, and sweeps what
// killed runs left beside the folder.
#include <gtest/gtest.h>

#include <filesystem>

#include "PilotTestSupport.h"
#include "pilot/OutputDir.h"
#include "pilot/Pilot.h"
#include "pilot/Spec.h"

namespace tp::pilot::testing {
namespace {

using release::read_text;
using release::write_text;

namespace fs = std::filesystem;

PilotOptions opts(const std::string& out, bool force = false) {
  PilotOptions o;
  o.out_dir = out;
  o.force = force;
  o.backends = FakeGpu{}.backends();
  o.progress = ProgressMode::off;
  return o;
}

TEST(OutputDir, ARerunReplacesTheEarlierOutputAsAWhole) {
  std::string dir = scratch_dir(), out = dir + "/out";
  run_pilot(parse_spec(small_gemm_spec(), "a.yaml"), opts(out));
  ASSERT_TRUE(fs::exists(out + "/release/manifest.json"));
  // While a run is under way its files go to a staging sibling; the folder is untouched
  // (PilotKill in tests/cli kills runs at random points to check the same end to end).
  // A rerun with a failing kernel replaces release/ by its own outputs, and nothing of it is
  // left beside the folder.
  run_pilot(parse_spec(small_gemm_spec("inject_fault: wrong_scale\n"), "c.yaml"), opts(out));
  EXPECT_FALSE(fs::exists(out + "/release"));
  EXPECT_TRUE(fs::exists(out + "/repro/repro.json"));
  EXPECT_TRUE(fs::exists(out + "/keep-framework.json"));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tilepilot-"), std::string::npos) << e.path();
  // The reproducer's command names the final folder, not the staging one.
  EXPECT_NE(read_text(out + "/repro/command.txt").find(fs::absolute(out).string() + "/repro"),
            std::string::npos);
}

TEST(OutputDir, TheUsersFilesAreKeptAndAForeignFolderIsRefusedUnlessForced) {
  std::string dir = scratch_dir(), out = dir + "/mine";
  write_text(out + "/pilot.log", "the log this run is tee'd into\n");
  run_pilot(parse_spec(small_gemm_spec(), "a.yaml"), opts(out));
  EXPECT_EQ(read_text(out + "/pilot.log"), "the log this run is tee'd into\n");
  EXPECT_TRUE(fs::exists(out + "/release/manifest.json"));
  write_text(out + "/thesis/chapter1.tex", "precious");
  try {
    run_pilot(parse_spec(small_gemm_spec(), "a.yaml"), opts(out));
    FAIL() << "a folder holding a user's folder was replaced";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("holds folders or special files that are not a pilot's output ('thesis')"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("pass --force"), std::string::npos) << m;
  }
  EXPECT_EQ(read_text(out + "/thesis/chapter1.tex"), "precious");
  run_pilot(parse_spec(small_gemm_spec(), "a.yaml"), opts(out, /*force=*/true));
  EXPECT_FALSE(fs::exists(out + "/thesis"));
  EXPECT_TRUE(fs::exists(out + "/report.json"));
  EXPECT_EQ(read_text(out + "/pilot.log"), "the log this run is tee'd into\n");
}

TEST(OutputDir, ARegularFileOrTheCurrentFolderIsRefused) {
  std::string dir = scratch_dir();
  write_text(dir + "/file", "x");
  EXPECT_THROW(prepare_output_dir(dir + "/file", false), UserError);
  try {
    prepare_output_dir(dir + "/file", true);
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("exists and is not a folder"), std::string::npos);
  }
  auto cwd = fs::current_path();
  fs::current_path(dir);
  EXPECT_THROW(prepare_output_dir(".", true), UserError);
  EXPECT_THROW(prepare_output_dir("..", true), UserError);
  fs::current_path(cwd);
  EXPECT_EQ(read_text(dir + "/file"), "x");
}

TEST(OutputDir, LeftoversOfDeadRunsAreSweptAndAMissingFolderIsRestored) {
  std::string dir = scratch_dir(), out = dir + "/out";
  // pid 2^22 + 1 is above Linux's default pid_max of 2^22: never a live process.
  const std::string dead = std::to_string((1 << 22) + 1);
  write_text(dir + "/.out.tilepilot-staging-" + dead + "/report.json", "{half");
  write_text(dir + "/.out.tilepilot-old-" + dead + "/report.json", "{\"earlier\": 1}");
  OutputDir d = prepare_output_dir(out, false);
  // The "old" sibling was the output of a run killed between two renames: it is put back.
  EXPECT_EQ(read_text(out + "/report.json"), "{\"earlier\": 1}");
  EXPECT_FALSE(fs::exists(dir + "/.out.tilepilot-staging-" + dead));
  EXPECT_FALSE(fs::exists(dir + "/.out.tilepilot-old-" + dead));
  EXPECT_TRUE(fs::is_directory(d.staging_dir));
  abandon_output_dir(d);
  EXPECT_FALSE(fs::exists(d.staging_dir));
}

} // namespace
} // namespace tp::pilot::testing
