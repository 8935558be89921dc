// Host time of a tuner's config space (no GPU): the tuner sizes every config of an operator's
// space before it compiles any. It does so from the compiler's plans (cuda::plan_for_shapes,
// behind Operator::estimate); before 2026-12-06 it lowered every config fully and emitted its
// CUDA source (cuda::lower_for_shapes). This times both over the same configs, per operator,
// at its example shape on sm_90a, and prints the ratio.
//   build/bench/bench_tuner_space [--runs 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "autotune/ConfigSpace.h"
#include "compile/Lower.h"
#include "ops/Operator.h"
#include "tilepilot/error.h"

using namespace tp;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Sizes every config of `knobs` for `p` the old way: a full lowering of each program step.
void lower_every_config(const ops::Operator& op, const ops::Problem& p,
                        const std::vector<ops::Knob>& knobs) {
  passes::Target t = passes::Target::parse("sm_90a");
  t.enforce_smem_limit = false;
  size_t total = 1;
  for (const ops::Knob& k : knobs)
    total *= k.values.size();
  for (size_t i = 0; i < total; ++i) {
    ops::Config c;
    for (size_t r = i, k = 0; k < knobs.size(); r /= knobs[k].values.size(), ++k)
      c[knobs[k].name] = knobs[k].values[r % knobs[k].values.size()];
    try {
      ops::check_config(op, p, c, "sm_90a");
      ops::KernelProgram prog = ops::checked_program(op, p, c);
      const std::vector<ops::ArgSpec> call = op.arg_specs(p);
      for (size_t s = 0; s < prog.steps.size(); ++s) {
        std::vector<ir::ArgDesc> descs;
        for (const ops::ArgSpec& a : ops::step_arg_specs(prog, s, call))
          descs.push_back({a.dtype, a.shape});
        cuda::lower_for_shapes(prog.steps[s].kernel, t, descs);
      }
    } catch (const UserError&) {}
  }
}

} // namespace

int main(int argc, char** argv) {
  int runs = 3;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--runs")) runs = std::max(1, std::atoi(argv[i + 1]));
  std::printf("%-18s %8s %12s %12s %7s\n", "operator", "configs", "plans (s)", "lowered (s)",
              "ratio");
  for (const ops::Operator* op : ops::all_operators()) {
    ops::Problem p;
    try {
      p = op->parse(op->example_shape(), bf16);
    } catch (const UserError&) {
      continue; // no bf16 example: not this benchmark's concern
    }
    const std::vector<ops::Knob> knobs = autotune::knob_space(*op, "sm_90a");
    const autotune::TargetLimits limits = autotune::TargetLimits::for_arch("sm_90a");
    std::vector<double> plans, lowered;
    size_t configs = 0;
    for (int r = 0; r < runs; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      autotune::ConfigSpace s = autotune::enumerate(*op, p, limits, knobs);
      plans.push_back(seconds_since(t0));
      configs = s.total();
      t0 = std::chrono::steady_clock::now();
      lower_every_config(*op, p, knobs);
      lowered.push_back(seconds_since(t0));
    }
    std::sort(plans.begin(), plans.end());
    std::sort(lowered.begin(), lowered.end());
    const double a = plans[plans.size() / 2], b = lowered[lowered.size() / 2];
    std::printf("%-18s %8zu %12.3f %12.3f %6.1fx\n", op->name().c_str(), configs, a, b, b / a);
  }
  return 0;
}
