// The H200 releases committed under docs/pilots/ load through the same reader dispatch uses
// (hashes, file list, pinned and framework-routed entries), and each tested shape routes the way
// its pilot decided: a pinned shape to its kernel, a framework-routed one to the framework with
// the measured reason. A release edited by hand, or written by an older pilot the loader no
// longer reads, fails here before it reaches a user.
#include <gtest/gtest.h>

#include <filesystem>

#include "dispatch/Routing.h"
#include "release/ReleaseManifest.h"

using namespace tp;

namespace {

const std::string kPilots = std::string(TILEPILOT_TESTS_DIR) + "/../docs/pilots";

std::vector<std::string> shipped_releases() {
  std::vector<std::string> out;
  for (const auto& d : std::filesystem::directory_iterator(kPilots))
    if (std::filesystem::is_directory(d.path() / "release")) out.push_back(d.path() / "release");
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST(ShippedReleases, EveryReleaseLoadsAndRoutesEachTestedShapeAsItsPilotDecided) {
  std::vector<std::string> dirs = shipped_releases();
  ASSERT_GE(dirs.size(), 7u) << "docs/pilots lost its release folders";
  int routed = 0;
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    release::Release rel = release::load_release(dir);
    dispatch::ReleaseSlot slot = dispatch::slot_for(rel);
    const ops::DeviceIdentity h200{slot.device_name, rel.device};
    ASSERT_FALSE(rel.pinned.empty());
    for (const auto& e : rel.pinned) {
      dispatch::Route r = dispatch::route(&slot, h200, e.problem, false);
      EXPECT_TRUE(r.pinned) << e.problem.shape_str() << ": " << r.why;
    }
    for (const auto& f : rel.framework_routed) {
      dispatch::Route r = dispatch::route(&slot, h200, f.problem, false);
      EXPECT_FALSE(r.pinned) << f.problem.shape_str();
      EXPECT_EQ(r.reason, ops::FallbackReason::framework_faster) << r.why;
      EXPECT_GT(f.kernel_speedup, 0);
      EXPECT_LE(f.kernel_speedup, 1) << "routed to the framework, yet measured faster";
      ++routed;
    }
    // Every tested shape is either pinned or routed: nothing in the matrix is left unserved.
    EXPECT_EQ(rel.pinned.size() + rel.framework_routed.size(), rel.matrix.size());
  }
  EXPECT_GT(routed, 0) << "no shipped release routes a shape to the framework";
}
