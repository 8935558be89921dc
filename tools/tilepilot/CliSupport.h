// Helpers shared by the CLI commands: argument validation with actionable messages and the
// backend dispatch of checks.
#pragma once
#include <string>

#include "ops/Check.h"

namespace tp::cli {

DType parse_dtype_or_fail(const std::string& s);
/// "cpu" or "cuda"; user error otherwise.
std::string check_backend(const std::string& s);
/// Runs a check on the requested backend.
ops::CheckResult run_check(const ops::Operator& op, const ops::Problem& p,
                           const ops::CheckOptions& o);

} // namespace tp::cli
