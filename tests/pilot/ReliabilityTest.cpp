// Silent wrong results the pilot layer must not produce: a host out-of-memory is a stage error
// (the decision stays undecided, never "keep the framework operator"); a reproducer's 32-bit
// seed is printed and replayed as recorded; a spec whose config cannot run on its device is a
// spec error before any stage; the default f32 tolerance grows with the reduction length.
#include <chrono>
#include <filesystem>
#include <sys/stat.h>

#include "PilotTestSupport.h"
#include "ops/Check.h"
#include "pilot/Pilot.h"
#include "pilot/Repro.h"
#include "release/ReleaseManifest.h"

using namespace tp;
using namespace tp::pilot;
using namespace tp::release;
using namespace tp::pilot::testing;

namespace {

std::string spec_error(const std::string& text) {
  try {
    parse_spec(text, "s.yaml");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(PilotReliability, HostOutOfMemoryIsAStageErrorNotAKernelFailure) {
  std::string dir = scratch_dir();
  PilotOptions o;
  o.out_dir = dir + "/out";
  o.backends = FakeGpu{}.backends();
  o.backends.check_cuda = [](const ops::Operator&, const ops::Problem&,
                             const ops::CheckOptions&) -> ops::CheckResult {
    throw std::bad_alloc();
  };
  o.progress = ProgressMode::off;
  PilotResult r = run_pilot(parse_spec(small_gemm_spec(), "oom.yaml"), o);
  const StageRecord* c = r.stage("correctness");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->failed());
  EXPECT_TRUE(c->data.value("stage_error", false)) << c->data.dump(2);
  EXPECT_NE(c->data["error"].get<std::string>().find("out of host memory"), std::string::npos);
  EXPECT_EQ(r.decision, kUndecided) << r.report["decision"].dump(2);
  EXPECT_FALSE(std::filesystem::exists(o.out_dir + "/keep-framework.json"));
  EXPECT_EQ(r.exit_code, 1); // a stage failed: not a clean run
}

TEST(PilotReliability, ATooLargeShapeIsRefusedBeforeAnyStage) {
  std::string dir = scratch_dir();
  PilotOptions o;
  o.out_dir = dir + "/out";
  o.progress = ProgressMode::off;
  std::string spec = small_gemm_spec();
  spec.replace(spec.find("{M: 7, N: 45"), 12, "{M: 2000000000, N: 4096");
  try {
    run_pilot(parse_spec(spec, "big.yaml"), o);
    FAIL() << "a 2e9-row GEMM was not refused";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("of host memory, but this machine has"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(o.out_dir)); // nothing was written
}

TEST(PilotReliability, ReproSeedAbove2To31IsPrintedAndReplayedAsRecorded) {
  std::string dir = scratch_dir() + "/repro";
  ReproCase c;
  c.problem = ops::find_operator("gemm").parse({{"M", "8"}, {"N", "8"}, {"K", "8"}}, DType::bf16);
  c.config = ops::find_operator("gemm").default_config(c.problem, "cpu");
  c.seed = 4000000000u; // a case seed is 32 bits: above INT_MAX half the time
  c.atol = c.rtol = 2e-2;
  c.fault = "wrong_scale";
  ops::CheckResult failing = run_case(c, default_backends());
  EXPECT_EQ(failing.seed, 4000000000u);
  write_repro(dir, c, failing, Backends{}, nlohmann::json::object(), "tilepilot");
  std::ostringstream out;
  EXPECT_EQ(replay_repro(dir, Backends{}, out), 1);
  EXPECT_NE(out.str().find("seed=4000000000"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("with the same failure"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("seed=-"), std::string::npos) << out.str();
}

TEST(PilotReliability, AConfigThatCannotRunOnTheDeviceIsASpecError) {
  // The default sm_90a GEMM config's shared memory holds bf16 tiles; an f32 spec pins a config
  // whose f32 tiles would not fit: refused at the spec, never a "keep framework" decision.
  std::string e = spec_error(small_gemm_spec("config: {bm: 256, bn: 256, bk: 64, stages: 8}\n"));
  EXPECT_NE(e.find("error: config: config "), std::string::npos) << e;
  EXPECT_NE(e.find("shared memory"), std::string::npos) << e;
  EXPECT_NE(e.find("pin a smaller config"), std::string::npos) << e;
  std::string s = small_gemm_spec("config: {persistent: 1}\n");
  s.replace(s.find("sm_90a"), 6, "sm_80");
  e = spec_error(s);
  EXPECT_NE(e.find("persistent=1 is not available on sm_80"), std::string::npos) << e;
}

TEST(PilotReliability, DefaultF32ToleranceGrowsWithTheReductionLength) {
  const ops::Operator& g = ops::find_operator("gemm");
  auto tol = [&](const char* K, DType t) {
    return ops::default_tolerance(g, g.parse({{"M", "16"}, {"N", "16"}, {"K", K}}, t));
  };
  auto base = g.tolerance(DType::f32);
  EXPECT_EQ(tol("64", DType::f32), base); // short reductions: the per-dtype default
  EXPECT_EQ(tol("256", DType::f32), base);
  EXPECT_DOUBLE_EQ(tol("16384", DType::f32).first, base.first * 8); // sqrt(16384 / 256)
  EXPECT_DOUBLE_EQ(tol("16384", DType::f32).second, base.second * 8);
  EXPECT_EQ(tol("16384", DType::bf16), g.tolerance(DType::bf16)); // bounded by output rounding
  // A correct long-K f32 kernel passes with the default tolerance on the interpreter.
  ops::Problem p = g.parse({{"M", "16"}, {"N", "16"}, {"K", "16384"}}, DType::f32);
  ops::CheckResult r = ops::check(g, p, {});
  EXPECT_TRUE(r.passed) << r.max_abs_err << " > " << r.atol;
  EXPECT_DOUBLE_EQ(r.atol, base.first * 8);
}

namespace {

/// A released folder (fake GPU: a fast kernel) to tamper with.
std::string released(const std::string& dir) {
  PilotOptions o;
  o.out_dir = dir + "/out";
  o.backends = FakeGpu{}.backends();
  o.progress = ProgressMode::off;
  PilotResult r = run_pilot(parse_spec(small_gemm_spec(), "rel.yaml"), o);
  EXPECT_EQ(r.decision, kRelease);
  return o.out_dir + "/release";
}

std::string load_error(const std::string& rel) {
  try {
    release::load_release(rel);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(ReleaseTamper, AnUnlistedMissingOrChangedFileInvalidatesTheRelease) {
  std::string rel = released(scratch_dir());
  ASSERT_EQ(load_error(rel), "");
  nlohmann::json m = read_json(rel + "/manifest.json");
  EXPECT_EQ(m["files_xxh64"], release::file_list_hash(m["files"]));
  // A failed case turned to passed, with its line removed from the manifest's list.
  nlohmann::json tm = read_json(rel + "/test_matrix.json");
  release::write_text(rel + "/test_matrix.json", tm.dump(1));
  nlohmann::json cut = m;
  cut["files"].erase("test_matrix.json");
  release::write_text(rel + "/manifest.json", cut.dump(2));
  EXPECT_NE(load_error(rel).find("test_matrix.json is not listed in manifest.json"),
            std::string::npos)
      << load_error(rel);
  // An empty list.
  cut["files"] = nlohmann::json::object();
  release::write_text(rel + "/manifest.json", cut.dump(2));
  EXPECT_NE(load_error(rel).find("invalid release: "), std::string::npos);
  // The list edited but not its hash.
  cut = m;
  cut["files"]["test_matrix.json"]["xxh64"] = release::xxh64_hex(tm.dump(1));
  release::write_text(rel + "/manifest.json", cut.dump(2));
  EXPECT_NE(load_error(rel).find("does not match its files_xxh64"), std::string::npos)
      << load_error(rel);
  release::write_text(rel + "/test_matrix.json", tm.dump(2) + "\n");
  release::write_text(rel + "/manifest.json", m.dump(2) + "\n");
  ASSERT_EQ(load_error(rel), "");
  // An extra file, then a missing one.
  release::write_text(rel + "/kernels/extra.cubin", "x");
  EXPECT_NE(load_error(rel).find("kernels/extra.cubin is not listed"), std::string::npos);
  std::filesystem::remove(rel + "/kernels/extra.cubin");
  std::string fb = release::read_text(rel + "/fallback.json");
  std::filesystem::remove(rel + "/fallback.json");
  EXPECT_NE(load_error(rel).find("fallback.json is listed in manifest.json but missing"),
            std::string::npos)
      << load_error(rel);
  release::write_text(rel + "/fallback.json", fb);
  EXPECT_EQ(load_error(rel), "");
}

TEST(ReleaseTamper, AFifoOrADirectoryWhereAFileBelongsIsRefusedWithoutBlocking) {
  std::string rel = released(scratch_dir());
  nlohmann::json m = read_json(rel + "/manifest.json");
  std::string cubin = m["files"].items().begin().key(); // any listed file
  for (const auto& [path, info] : m["files"].items())
    if (path.size() > 6 && path.substr(path.size() - 6) == ".cubin") cubin = path;
  std::filesystem::remove(rel + "/" + cubin);
  ASSERT_EQ(::mkfifo((rel + "/" + cubin).c_str(), 0600), 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(load_error(rel).find(cubin + " is not a regular file"), std::string::npos)
      << load_error(rel);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  std::filesystem::remove(rel + "/" + cubin);
  std::filesystem::create_directories(rel + "/" + cubin);
  EXPECT_NE(load_error(rel).find(cubin + " is listed in manifest.json but missing"),
            std::string::npos)
      << load_error(rel);
}
