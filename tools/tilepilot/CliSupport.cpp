// CLI helpers.
#include "CliSupport.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>

#include "ops/CudaCheck.h"
#include "tilepilot/error.h"

namespace tp::cli {

DType parse_dtype_or_fail(const std::string& s) {
  auto t = parse_dtype(s);
  if (!t || !(*t == DType::bf16 || *t == DType::f16 || *t == DType::f32))
    user_error() << "unsupported --dtype '" << s << "'; use bf16, f16 or f32";
  return *t;
}

std::string check_backend(const std::string& s) {
  if (s != "cpu" && s != "cuda")
    user_error() << "unknown --backend '" << s
                 << "'; use cpu (the reference interpreter) or cuda (an NVIDIA GPU)";
  return s;
}

uint64_t parse_seed(const std::string& text, const std::string& flag) {
  bool digits = !text.empty() && text.size() <= 20 &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  errno = 0;
  unsigned long long v = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE)
    user_error() << flag << " '" << text << "' is not a seed; use an integer from 0 to "
                 << std::numeric_limits<uint64_t>::max();
  return v;
}

namespace {
bool parse_double(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && errno != ERANGE && std::isfinite(*out);
}
} // namespace

double parse_tolerance(const std::string& text, const std::string& flag) {
  double v = 0;
  if (!parse_double(text, &v) || v < 0)
    user_error() << flag << " '" << text << "' is not a tolerance; use a finite number >= 0, "
                 << "e.g. " << flag << " 2e-2 (leave it out for the dtype's default)";
  if (v >= 1)
    std::cerr << "tilepilot: warning: " << flag << " " << text
              << " is so loose that the check can hardly fail\n";
  return v;
}

double parse_positive(const std::string& text, const std::string& flag) {
  double v = 0;
  if (!parse_double(text, &v) || v <= 0)
    user_error() << flag << " '" << text << "' must be a finite number > 0";
  return v;
}

ops::CheckResult run_check(const ops::Operator& op, const ops::Problem& p,
                           const ops::CheckOptions& o) {
  if (o.backend == "cuda") return ops::check_cuda(op, p, o);
  return ops::check(op, p, o);
}

} // namespace tp::cli
