// RmsNormOp: the Operator over RMSNorm's kernel, references and framework chain.
#include "ops/rmsnorm/RmsNormOp.h"

#include <algorithm>

#include "ops/rmsnorm/RmsNorm.h"
#include "ops/rmsnorm/RmsNormFramework.h"
#include "tilepilot/error.h"

namespace tp::ops {

std::string RmsNormOp::summary() const {
  return "y = x rsqrt(mean(x^2) + 1e-5) w over rows of H, f32 math; residual=1 first adds r "
         "and also returns s = x + r (Llama's RMSNorm)";
}

std::vector<std::pair<std::string, std::string>> RmsNormOp::shape_keys() const {
  return {{"T", "tokens (rows)"},
          {"H", "hidden size (row length)"},
          {"residual", "0 or 1: inputs x, r, w and outputs s = x + r, y (default 0: x, w -> y)"}};
}

Problem RmsNormOp::parse(const std::map<std::string, std::string>& kv, DType dtype) const {
  return rmsnorm::parse(kv, dtype);
}

Problem RmsNormOp::problem_for(const std::vector<std::vector<int64_t>>& shapes,
                               const std::vector<DType>& dtypes,
                               const std::map<std::string, std::string>& options) const {
  if (shapes.size() != 3 && shapes.size() != 5)
    user_error() << "rmsnorm: takes 3 tensors (x, w, y) or, with the residual, 5 (x, r, w, s, "
                    "y); got "
                 << shapes.size();
  const bool residual = shapes.size() == 5;
  if (auto it = options.find("residual");
      it != options.end() && it->second != (residual ? "1" : "0"))
    user_error() << "rmsnorm: residual=" << it->second << " but " << shapes.size()
                 << " tensors were given; residual=1 takes x, r, w, s, y and residual=0 x, w, y";
  const std::vector<std::string> names = residual
                                             ? std::vector<std::string>{"x", "r", "w", "s", "y"}
                                             : std::vector<std::string>{"x", "w", "y"};
  const std::vector<int64_t>& x = shapes[0];
  if (x.size() != 2)
    user_error() << "rmsnorm: x must be 2-d [T, H], got " << x.size()
                 << " dimensions; flatten the leading dimensions into T";
  for (size_t i = 0; i < shapes.size(); ++i) {
    const bool is_w = names[i] == "w";
    std::vector<int64_t> want = is_w ? std::vector<int64_t>{x[1]} : x;
    if (shapes[i] != want)
      user_error() << "rmsnorm: tensor '" << names[i] << "' must be "
                   << (is_w ? "[H] = [" + std::to_string(x[1]) + "]"
                            : "[T, H] = [" + std::to_string(x[0]) + ", " + std::to_string(x[1]) +
                                  "]")
                   << " like x";
    if (dtypes.at(i) != dtypes[0])
      user_error() << "rmsnorm: tensor '" << names[i] << "' is " << dtype_name(dtypes[i])
                   << " but x is " << dtype_name(dtypes[0]) << "; all tensors share one dtype";
  }
  return rmsnorm::parse({{"T", std::to_string(x[0])},
                         {"H", std::to_string(x[1])},
                         {"residual", residual ? "1" : "0"}},
                        dtypes[0]);
}

Problem RmsNormOp::problem_from_inputs(const std::vector<std::vector<int64_t>>& shapes,
                                       const std::vector<DType>& dtypes,
                                       const std::map<std::string, std::string>& options) const {
  if (shapes.size() != 2 && shapes.size() != 3)
    user_error() << "rmsnorm: takes 2 inputs (x, w) or, with the residual, 3 (x, r, w); got "
                 << shapes.size();
  // The outputs take x's shape and dtype: y, and s before it with the residual.
  std::vector<std::vector<int64_t>> all = shapes;
  std::vector<DType> types = dtypes;
  for (size_t i = 0; i < (shapes.size() == 3 ? 2u : 1u); ++i) {
    all.push_back(shapes[0]);
    types.push_back(dtypes.at(0));
  }
  return problem_for(all, types, options);
}

std::string RmsNormOp::variant_label(const Problem& p) const {
  return p.at("residual") ? "residual" : "none";
}

std::vector<Knob> RmsNormOp::knobs(const std::string& arch) const {
  // The interpreter's speed does not depend on the block shape: one value each to try there.
  if (arch == "cpu")
    return {{"rows", {1}, "rows per block", 1, 16},
            {"threads", {256}, "threads per block (a multiple of 32)", 32, 1024, 0, 32}};
  return {
      {"rows", {1, 2, 4}, "rows per block", 1, 16},
      {"threads", {128, 256, 512, 1024}, "threads per block (a multiple of 32)", 32, 1024, 0, 32}};
}

Config RmsNormOp::default_config(const Problem& p, const std::string& arch) const {
  return rmsnorm::default_config(p, arch);
}

void RmsNormOp::validate(const Problem& p, const Config& c) const {
  rmsnorm::validate(p, c);
}

Kernel RmsNormOp::build(const Problem& p, const Config& c) const {
  return rmsnorm::build(p, c);
}

std::vector<ArgSpec> RmsNormOp::arg_specs(const Problem& p) const {
  const std::vector<int64_t> th = {p.at("T"), p.at("H")};
  if (p.at("residual"))
    return {{p.dtype, th}, {p.dtype, th}, {p.dtype, {p.at("H")}}, {p.dtype, th}, {p.dtype, th}};
  return {{p.dtype, th}, {p.dtype, {p.at("H")}}, {p.dtype, th}};
}

std::vector<HostTensor> RmsNormOp::make_args(const Problem& p, uint64_t seed) const {
  return rmsnorm::make_args(p, seed);
}

std::vector<int> RmsNormOp::outputs(const Problem& p) const {
  return rmsnorm::outputs(p);
}

double RmsNormOp::flops(const Problem& p) const {
  // Per element: square, sum, scale by the row's rsqrt, scale by w; the residual add.
  return static_cast<double>(p.at("T")) * p.at("H") * (4 + p.at("residual"));
}

double RmsNormOp::min_bytes(const Problem& p) const {
  // x and y; r and s with the residual; w once.
  const double th = static_cast<double>(p.at("T")) * p.at("H");
  return (th * (p.at("residual") ? 4 : 2) + p.at("H")) * dtype_bytes(p.dtype);
}

std::vector<double> RmsNormOp::reference(const Problem& p, const std::vector<HostTensor>& args,
                                         const Box& box) const {
  return rmsnorm::reference(p, args, box.tensor, box.min[0], box.extent[0], box.min[1],
                            box.extent[1]);
}

std::string RmsNormOp::framework_name() const {
  return rmsnorm::kFrameworkName;
}

std::unique_ptr<Framework> RmsNormOp::framework(const Problem& p, const FrameworkOptions&) const {
  // No vendor library is involved: the options' disabled libraries and allow_vendor change
  // nothing.
  return rmsnorm::make_framework(p);
}

} // namespace tp::ops
