// Shrinking a failing correctness case to a smaller one that still fails: greedily try, for
// each size key (M, N, K; B, H, Hkv, S, Skv, D), the value 1 and then half the value (H with
// Hkv and S with Skv also together), keep any candidate that the operator accepts and that
// still fails, and repeat until nothing shrinks or the attempt budget is spent. Flags (causal,
// lse, layout) are kept; a padded batch keeps its first B key lengths, clamped to Skv.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>

#include "ops/Check.h"

namespace tp::pilot {

struct ShrinkResult {
  ops::Problem problem;                           // the smallest failing problem found
  ops::CheckResult result;                        // its failing check
  int attempts = 0;                               // checks run
  nlohmann::json steps = nlohmann::json::array(); // accepted shrinks, in order
};

/// `run` checks a candidate problem. `start` must have failed with `start_result`.
ShrinkResult shrink_failure(const ops::Operator& op, const ops::Problem& start,
                            const ops::CheckResult& start_result,
                            const std::function<ops::CheckResult(const ops::Problem&)>& run,
                            int max_attempts);

} // namespace tp::pilot
