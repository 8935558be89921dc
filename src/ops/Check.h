// Correctness check of an operator against its fp64 reference: fresh seeded inputs, poisoned
// outputs, NaN/Inf never pass, |out - ref| <= atol + rtol |ref| for every checked element.
// Large problems on the interpreter run a deterministic sample of blocks and compare exactly
// the outputs those blocks write; the result says how many blocks and elements were checked.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>

#include "ops/Operator.h"

namespace tp::ops {

struct CheckOptions {
  std::string backend = "cpu"; // cpu | cuda
  std::string arch = "cpu";    // picks the default config
  uint64_t seed = 0;
  Config config;                 // empty: the operator's default for arch
  double atol = -1, rtol = -1;   // negative: the operator's default for the dtype
  double flop_budget = 3e8;      // interpreter: sample blocks beyond this much work
  double reference_budget = 3e9; // GPU backends: fp64 reference flops on the CPU
};

struct CheckResult {
  std::string op;
  Problem problem;
  std::string backend;
  Config config;
  uint64_t seed = 0;
  double max_abs_err = 0, rel_l2_err = 0, atol = 0, rtol = 0;
  bool passed = false;
  int64_t checked = 0, bad = 0, nonfinite = 0;
  int64_t blocks_run = 0, blocks_total = 0;
  std::string first_bad; // where the first failing element is, and its values
  double seconds = 0;
};

/// Runs a one-kernel program's blocks (a caller's own launcher of that kernel).
using BlockRunner = std::function<void(const Kernel&, std::vector<HostTensor>&,
                                       const std::vector<std::array<int64_t, 3>>& blocks)>;
/// Runs an operator's program on the call's host tensors: the CPU interpreter by default, a
/// GPU launcher for the CUDA backend. `blocks` are the last step's to run (empty: the whole
/// grid); earlier steps always run whole.
using ProgramRunner = std::function<void(const KernelProgram&, std::vector<HostTensor>&,
                                         const std::vector<std::array<int64_t, 3>>& blocks)>;

/// The operator's default tolerance for p's dtype. For f32 it grows with the reduction length
/// n as sqrt(n / 256) (n <= 256: unchanged): the rounding error of an f32 sum of n terms grows
/// like sqrt(n), so a fixed bound fails correct long-K kernels. bf16 and f16 are bounded by
/// the output's rounding, which their defaults already allow for.
std::pair<double, double> default_tolerance(const Operator& op, const Problem& p);

CheckResult check(const Operator& op, const Problem& p, const CheckOptions& o);
/// Same, with a caller-supplied runner (the CUDA backend runs the whole grid).
CheckResult check_program_with(const Operator& op, const Problem& p, const CheckOptions& o,
                               const ProgramRunner& run);
/// The same for a one-kernel operator, with a runner of that kernel; user error when op's
/// program has several steps.
CheckResult check_with(const Operator& op, const Problem& p, const CheckOptions& o,
                       const BlockRunner& run);

nlohmann::json to_json(const CheckResult& r);

} // namespace tp::ops
