// CLI helpers.
#include "CliSupport.h"

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

ops::CheckResult run_check(const ops::Operator& op, const ops::Problem& p,
                           const ops::CheckOptions& o) {
  if (o.backend == "cuda") return ops::check_cuda(op, p, o);
  return ops::check(op, p, o);
}

} // namespace tp::cli
