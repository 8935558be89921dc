// The fallback, checked: the operator's framework operator run on the operator's seeded inputs
// and compared with its fp32 GPU reference (Operator::gpu_reference). A stand-in framework (one
// whose note says why the framework's own cannot run) may be that GPU reference itself;
// comparing it with itself would prove nothing, so a stand-in - and any operator without a GPU
// reference - is compared with the fp64 CPU reference on the outputs of sampled blocks, and the
// result says which framework and which comparison it was.
#pragma once
#include <cstdint>
#include <string>

#include "ops/Operator.h"

namespace tp::perf {

struct FallbackCheck {
  std::string name;    // "cuBLASLt 13.1.0", "cuDNN 9.14.0", "unfused fp32 GPU reference"
  std::string note;    // why the unfused reference is the fallback; "" for a vendor library
  std::string against; // "fp32 GPU reference" or "fp64 CPU reference (sampled blocks)"
  bool passed = false;
  double max_abs_err = 0, rel_l2_err = 0, atol = 0, rtol = 0;
  int64_t checked = 0, bad = 0;
  std::string first_bad; // where the first failing element is, and its values
};

/// Runs and checks the fallback for `p` on the current GPU with the operator's default
/// tolerance for the dtype. User error when there is no GPU or no fallback for `p`.
/// `allow_vendor` false asks the operator for its stand-in (to test that stand-in).
FallbackCheck check_fallback(const ops::Operator& op, const ops::Problem& p, uint64_t seed = 5,
                             bool allow_vendor = true);

} // namespace tp::perf
