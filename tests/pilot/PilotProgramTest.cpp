// The pilot on an operator whose call runs two kernels (tests/support/TwoPassRowSum.h), with the
// fake GPU hooks: cases of one program share one compile that lists both steps, the release
// pins each step's source and cubin and reads back, and a broken last step leaves a reproducer
// whose files hold both steps headed by their names.
#include "PilotTestSupport.h"
#include "TwoPassRowSum.h"
#include "pilot/Pilot.h"
#include "release/ReleaseManifest.h"

using namespace tp;
using namespace tp::pilot;
using namespace tp::pilot::testing;

namespace {

std::string rowsum_spec(const std::string& extra = "") {
  test::two_pass_rowsum(); // registered before the spec names it
  return R"(operator: test_two_pass_rowsum
device: sm_90a
dtypes: [f32]
shapes:
  representative:
    - {R: 64, C: 1000, weight: 1.0}
  edge:
    - {R: 1, C: 1}
    - {R: 40, C: 100}
reference: framework
tolerance: {atol: 1e-3, rtol: 1e-3}
objective: {metric: weighted_latency, min_speedup: 1.1}
memory_limit_mb: 512
metrics: [correctness, compile, warm, memory]
fallback: required
seed: 7
)" + extra;
}

PilotResult run_rowsum(const std::string& dir, const std::string& extra = "") {
  PilotOptions o;
  o.out_dir = dir;
  o.backends = FakeGpu{0.5, 100}.backends();
  o.progress = ProgressMode::off;
  return run_pilot(parse_spec(rowsum_spec(extra), "rowsum.yaml"), o);
}

} // namespace

TEST(PilotProgram, OneCompileListsBothStepsAndTheReleasePinsEach) {
  std::string dir = scratch_dir();
  PilotResult r = run_rowsum(dir);
  ASSERT_EQ(r.decision, kRelease) << r.report["decision"].dump(2);

  const nlohmann::json& kernels = r.stage("compile")->data["kernels"];
  ASSERT_EQ(kernels.size(), 1u) << "three cases of one program: one compile";
  EXPECT_EQ(kernels[0]["cases"].size(), 3u);
  EXPECT_EQ(kernels[0]["kernel"], "rowsum_partials+rowsum_combine");
  ASSERT_EQ(kernels[0]["steps"].size(), 2u);
  EXPECT_EQ(kernels[0]["steps"][0]["kernel"], "rowsum_partials");
  EXPECT_DOUBLE_EQ(kernels[0]["nvrtc_ms"].get<double>(), 2 * 12.5) << "both steps' NVRTC time";

  nlohmann::json pinned = read_json(dir + "/release/pinned.json");
  ASSERT_EQ(pinned["entries"].size(), 3u);
  for (const nlohmann::json& e : pinned["entries"]) {
    ASSERT_EQ(e["steps"].size(), 2u) << e.dump(2);
    EXPECT_EQ(e["steps"][0]["args"], nlohmann::json::array({0, 2}));
    EXPECT_EQ(e["steps"][1]["args"], nlohmann::json::array({2, 1}));
    // source and cubin name the last step's files, the one that writes the outputs.
    EXPECT_EQ(e["source"], e["steps"][1]["source"]);
    for (const nlohmann::json& s : e["steps"])
      EXPECT_TRUE(std::filesystem::exists(dir + "/release/" + s["cubin"].get<std::string>()))
          << s.dump();
  }
  release::Release rel = release::load_release(dir + "/release"); // hashes check out
  EXPECT_EQ(rel.op, "test_two_pass_rowsum");
  EXPECT_EQ(rel.pinned.size(), 3u);
}

TEST(PilotProgram, BrokenLastStepLeavesAReproducerOfBothSteps) {
  std::string dir = scratch_dir();
  PilotResult r = run_rowsum(dir, "inject_fault: wrong_scale\n");
  EXPECT_NE(r.decision, kRelease);
  const std::string ir = release::read_text(dir + "/repro/kernel.ir.txt");
  const size_t first = ir.find("// ===== step 0: rowsum_partials =====");
  const size_t second = ir.find("// ===== step 1: rowsum_combine_fault_wrong_scale =====");
  EXPECT_NE(first, std::string::npos) << ir;
  EXPECT_NE(second, std::string::npos) << ir;
  EXPECT_LT(first, second);
  EXPECT_NE(release::read_text(dir + "/repro/kernel.cu.txt").find("fake CUDA for rowsum_partials"),
            std::string::npos);
}
