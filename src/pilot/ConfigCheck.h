// Whether a config can run on a target arch, decided before anything is compiled: knobs the
// arch lacks (TMA-only knobs such as persistent or cluster on sm_80) and shared memory over the
// arch's per-block limit are spec/config errors, never a kernel failure or a release decision.
#pragma once
#include <string>

#include "ops/Operator.h"

namespace tp::pilot {

/// "" when `c` can run `p` on `arch` (sm_90a, sm_80), else why not and how to fix it.
std::string config_problem(const ops::Operator& op, const ops::Problem& p, const std::string& arch,
                           const ops::Config& c);

/// Whether the resource model knows `arch` ("" when it does, else the reason).
std::string arch_problem(const std::string& arch);

} // namespace tp::pilot
