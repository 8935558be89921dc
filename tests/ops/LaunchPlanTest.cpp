// The tuner sizes every config of its space from the compiler's plans alone
// (cuda::plan_for_shapes, behind Operator::estimate): this holds those sizes to the full
// lowering's (cuda::lower_for_shapes, what a launch uses) over a sample of every built-in
// operator's space on both GPU arches, with aligned and unaligned rows (the TMA-free variant).
#include <gtest/gtest.h>

#include "autotune/ConfigSpace.h"
#include "compile/Lower.h"
#include "ops/Operator.h"
#include "tilepilot/error.h"

using namespace tp;

namespace {

/// The operator's example problem in the first dtype it takes; nullopt when it takes none.
std::optional<ops::Problem> example(const ops::Operator& op,
                                    std::map<std::string, std::string> shape) {
  for (DType dt : {bf16, f16, f32}) {
    try {
      return op.parse(shape, dt);
    } catch (const UserError&) {}
  }
  return std::nullopt;
}

/// "error" or "threads T, smem S" for one step, so that a mismatch prints both sides.
template <typename F>
std::string sized(F f) {
  try {
    auto [threads, smem] = f();
    return "threads " + std::to_string(threads) + ", smem " + std::to_string(smem);
  } catch (const UserError&) {
    return "error";
  }
}

/// Compares the two sizings over about `samples` configs of `op`'s space on `arch`; returns how
/// many steps were compared.
int compare_space(const ops::Operator& op, const ops::Problem& p, const std::string& arch,
                  int samples) {
  std::vector<ops::Knob> knobs = autotune::knob_space(op, arch);
  size_t total = 1;
  for (const ops::Knob& k : knobs)
    total *= k.values.size();
  const size_t stride = std::max<size_t>(1, total / samples);
  passes::Target t = passes::Target::parse(arch);
  t.enforce_smem_limit = false; // as Operator::estimate: big tiles are sized, not refused
  int compared = 0;
  for (size_t i = 0; i < total; i += stride) {
    ops::Config c;
    for (size_t r = i, k = 0; k < knobs.size(); r /= knobs[k].values.size(), ++k)
      c[knobs[k].name] = knobs[k].values[r % knobs[k].values.size()];
    ops::KernelProgram prog;
    try {
      ops::check_config(op, p, c, arch);
      prog = ops::checked_program(op, p, c);
    } catch (const UserError&) {
      continue; // refused before lowering, by either path alike
    }
    const std::vector<ops::ArgSpec> call = op.arg_specs(p);
    for (size_t s = 0; s < prog.steps.size(); ++s) {
      std::vector<ir::ArgDesc> descs;
      for (const ops::ArgSpec& a : ops::step_arg_specs(prog, s, call))
        descs.push_back({a.dtype, a.shape});
      const Kernel& k = prog.steps[s].kernel;
      std::string full = sized([&] {
        cuda::LoweredKernel lk = cuda::lower_for_shapes(k, t, descs);
        return std::pair<int64_t, int64_t>(lk.block_threads, lk.smem_bytes);
      });
      std::string plan = sized([&] {
        cuda::LaunchResources r = cuda::plan_for_shapes(k, t, descs);
        return std::pair<int64_t, int64_t>(r.block_threads, r.smem_bytes);
      });
      EXPECT_EQ(plan, full) << op.name() << " on " << arch << ", " << ops::config_str(c)
                            << ", step " << s;
      ++compared;
    }
  }
  return compared;
}

} // namespace

TEST(LaunchPlan, PlansSizeEveryOperatorsLaunchAsTheFullLoweringDoes) {
  for (const ops::Operator* op : ops::all_operators()) {
    std::optional<ops::Problem> p = example(*op, op->example_shape());
    ASSERT_TRUE(p) << op->name() << ": its example shape parses in no dtype";
    for (const char* arch : {"sm_90a", "sm_80"}) {
      if (!op->unsupported_on(*p, arch).empty()) continue;
      EXPECT_GT(compare_space(*op, *p, arch, 24), 0) << op->name() << " on " << arch;
    }
  }
}

// Rows that are not 16-byte multiples take the TMA-free variant, whose plan differs.
TEST(LaunchPlan, UnalignedRowsAreSizedForTheVariantWithoutTma) {
  const ops::Operator& gemm = ops::find_operator("gemm");
  std::optional<ops::Problem> p = example(gemm, {{"M", "1000"}, {"N", "1000"}, {"K", "1001"}});
  ASSERT_TRUE(p);
  EXPECT_GT(compare_space(gemm, *p, "sm_90a", 24), 0);
}
