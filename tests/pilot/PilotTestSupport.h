// Helpers for the pilot tests: scratch folders, running the CLI, and clearly fake GPU backends
// (FakeGpu) that let the decision and release logic run on a machine without a GPU. The fakes
// live only in tests; their "measurements" are made-up numbers chosen by each test.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "RunCli.h"
#include "ir/IR.h"
#include "pilot/Backends.h"
#include "release/Files.h"

namespace tp::pilot::testing {

/// A fresh folder under the build's temp dir, named after the running test.
inline std::string scratch_dir() {
  const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = std::filesystem::temp_directory_path() /
             (std::string("tilepilot-pilot-") + t->test_suite_name() + "-" + t->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

using tp::testing::CliResult;
using tp::testing::run_cli;

/// A small gemm spec that runs in well under a second on the interpreter.
inline std::string small_gemm_spec(const std::string& extra = "") {
  return R"(operator: gemm
device: sm_90a
dtypes: [bf16]
shapes:
  representative:
    - {M: 64, N: 64, K: 64, weight: 0.75}
    - {M: 96, N: 64, K: 32, weight: 0.25}
  edge:
    - {M: 7, N: 45, K: 133, layout: nt}
reference: framework
tolerance: {atol: 2e-2, rtol: 2e-2}
objective: {metric: weighted_latency, min_speedup: 1.1}
memory_limit_mb: 512
metrics: [correctness, compile, warm, memory]
fallback: required
seed: 7
)" + extra;
}

/// Made-up GPU hooks. `speed` is our time relative to the reference (0.5: twice as fast);
/// `peak_mb` is the kernel's fake peak memory.
struct FakeGpu {
  double speed = 0.5;
  double peak_mb = 100;
  /// When set, our relative time per problem (overrides `speed`).
  std::function<double(const ops::Problem&)> speed_for;

  Backends backends() const {
    Backends b;
    b.device = [](std::string*) {
      rt::DeviceInfo d;
      d.name = "Fake H200 (test double)";
      d.cc_major = 9;
      d.arch = "sm_90a";
      d.sm_count = 132;
      return std::optional<rt::DeviceInfo>(d);
    };
    // The "GPU" check is the interpreter, relabeled: the decision logic only needs a result.
    b.check_cuda = [](const ops::Operator& op, const ops::Problem& p, const ops::CheckOptions& o) {
      ops::CheckOptions c = o;
      c.backend = "cpu";
      ops::CheckResult r = ops::check(op, p, c);
      r.backend = "fake-cuda";
      return r;
    };
    b.compile_only = [](const Kernel& k, const std::string& arch) {
      CompileOnlyResult r;
      r.cuda_source = "// fake CUDA for " + k->name + " on " + arch + "\n";
      r.cubin = std::string("FAKECUBIN\0\x01\x02", 12);
      r.nvrtc_ms = 12.5;
      r.resources = {{"registers", 128}, {"shared_bytes", 65536}};
      return r;
    };
    b.compile_timing = [](const ops::Operator&, const ops::Problem&, const ops::Config&,
                          const std::string&) {
      return CompileTiming{{{"build", 1}, {"passes", 2}, {"codegen", 3}, {"nvrtc", 300}}, 306, 0.5};
    };
    double speed_all = speed;
    auto speed_of = speed_for;
    b.warm_timing = [speed_all, speed_of](const ops::Operator& op, const ops::Problem& p,
                                          const ops::Config&) {
      double s = speed_of ? speed_of(p) : speed_all;
      double ref = op.flops(p) / 5e14 * 1e3 + 0.01; // a made-up 500 TFLOP/s reference
      return WarmTiming{ref * s, ref * s * 0.02, "FakeBLAS", ref, ref * 0.02, 50};
    };
    double mb = peak_mb;
    b.memory = [mb](const ops::Operator&, const ops::Problem&, const ops::Config&) {
      return MemoryUsage{mb, mb * 1.5};
    };
    b.fallback_test = [](const ops::Operator&, const ops::Problem&) {
      return FallbackResult{"FakeBLAS", true, 1e-3};
    };
    return b;
  }
};

inline nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(release::read_text(path));
}

} // namespace tp::pilot::testing
