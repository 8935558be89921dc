// Helpers shared by the CLI commands: argument validation with actionable messages and the
// backend dispatch of checks.
#pragma once
#include <string>

#include "ops/Check.h"

namespace tp::cli {

DType parse_dtype_or_fail(const std::string& s);
/// "cpu" or "cuda"; user error otherwise.
std::string check_backend(const std::string& s);
/// A seed: decimal digits only, at most 2^64 - 1 (so "-1" never wraps around). User error
/// naming `flag` otherwise.
uint64_t parse_seed(const std::string& text, const std::string& flag);
/// A tolerance given on the command line: finite and >= 0 (user error otherwise); a warning on
/// stderr when it is so loose (>= 1) that the check can hardly fail.
double parse_tolerance(const std::string& text, const std::string& flag);
/// A finite number > 0; user error naming `flag` otherwise.
double parse_positive(const std::string& text, const std::string& flag);
/// Runs a check on the requested backend.
ops::CheckResult run_check(const ops::Operator& op, const ops::Problem& p,
                           const ops::CheckOptions& o);

} // namespace tp::cli
