// SwiGluOp: the Operator over SwiGLU's kernel, references and framework chain.
#include "ops/swiglu/SwiGluOp.h"

#include <algorithm>

#include "ops/swiglu/SwiGlu.h"
#include "ops/swiglu/SwiGluFramework.h"
#include "tilepilot/error.h"

namespace tp::ops {

std::string SwiGluOp::summary() const {
  return "out[T, I] = silu(gate) up, gate and up the halves of gu[T, 2I] (a fused gate/up "
         "projection's output); f32 math";
}

std::vector<std::pair<std::string, std::string>> SwiGluOp::shape_keys() const {
  return {{"T", "tokens (rows)"},
          {"I", "intermediate size: out is [T, I], gu is [T, 2I] (gate, then up)"}};
}

Problem SwiGluOp::parse(const std::map<std::string, std::string>& kv, DType dtype) const {
  return swiglu::parse(kv, dtype);
}

Problem SwiGluOp::problem_for(const std::vector<std::vector<int64_t>>& shapes,
                              const std::vector<DType>& dtypes,
                              const std::map<std::string, std::string>& options) const {
  if (!options.empty())
    user_error() << "swiglu: takes no options, got '" << options.begin()->first << "'";
  if (shapes.size() != 2)
    user_error() << "swiglu: takes 2 tensors (gu, out), got " << shapes.size();
  const std::vector<int64_t>& gu = shapes[0];
  if (gu.size() != 2 || gu[1] % 2)
    user_error() << "swiglu: tensor 'gu' must be [T, 2I] (gate, then up, per row), got "
                 << (gu.size() == 2 ? "an odd row length " + std::to_string(gu[1])
                                    : std::to_string(gu.size()) + " dimensions");
  if (shapes[1] != std::vector<int64_t>{gu[0], gu[1] / 2})
    user_error() << "swiglu: tensor 'out' must be [T, I] = [" << gu[0] << ", " << gu[1] / 2
                 << "] for gu [" << gu[0] << ", " << gu[1] << "]";
  if (dtypes.at(1) != dtypes.at(0))
    user_error() << "swiglu: tensor 'out' is " << dtype_name(dtypes[1]) << " but gu is "
                 << dtype_name(dtypes[0]) << "; both share one dtype";
  return swiglu::parse({{"T", std::to_string(gu[0])}, {"I", std::to_string(gu[1] / 2)}}, dtypes[0]);
}

Problem SwiGluOp::problem_from_inputs(const std::vector<std::vector<int64_t>>& shapes,
                                      const std::vector<DType>& dtypes,
                                      const std::map<std::string, std::string>& options) const {
  if (shapes.size() != 1 || shapes[0].size() != 2)
    user_error() << "swiglu: takes one 2-d input gu [T, 2I]";
  // out is [T, I] in gu's dtype.
  return problem_for({shapes[0], {shapes[0][0], shapes[0][1] / 2}}, {dtypes.at(0), dtypes[0]},
                     options);
}

std::vector<Knob> SwiGluOp::knobs(const std::string& arch) const {
  if (arch == "cpu")
    return {{"bm", {8}, "rows per block", 1, 64},
            {"bn", {256}, "columns of out per block", 1, 4096},
            {"threads", {128}, "threads per block (a multiple of 32)", 32, 1024, 0, 32}};
  return {{"bm", {1, 2, 4, 8}, "rows per block", 1, 64},
          {"bn", {128, 256, 512, 1024}, "columns of out per block", 1, 4096},
          {"threads", {32, 64, 128, 256}, "threads per block (a multiple of 32)", 32, 1024, 0, 32}};
}

Config SwiGluOp::default_config(const Problem& p, const std::string& arch) const {
  return swiglu::default_config(p, arch);
}

void SwiGluOp::validate(const Problem& p, const Config& c) const {
  swiglu::validate(p, c);
}

Kernel SwiGluOp::build(const Problem& p, const Config& c) const {
  return swiglu::build(p, c);
}

std::vector<ArgSpec> SwiGluOp::arg_specs(const Problem& p) const {
  return {{p.dtype, {p.at("T"), 2 * p.at("I")}}, {p.dtype, {p.at("T"), p.at("I")}}};
}

std::vector<HostTensor> SwiGluOp::make_args(const Problem& p, uint64_t seed) const {
  return swiglu::make_args(p, seed);
}

double SwiGluOp::flops(const Problem& p) const {
  // Per output: the sigmoid (exp, add, divide), two multiplies.
  return 5.0 * p.at("T") * p.at("I");
}

double SwiGluOp::min_bytes(const Problem& p) const {
  return 3.0 * p.at("T") * p.at("I") * dtype_bytes(p.dtype);
}

std::vector<double> SwiGluOp::reference(const Problem& p, const std::vector<HostTensor>& args,
                                        const Box& box) const {
  return swiglu::reference(p, args, box.min[0], box.extent[0], box.min[1], box.extent[1]);
}

std::string SwiGluOp::framework_name() const {
  return swiglu::kFrameworkName;
}

std::unique_ptr<Framework> SwiGluOp::framework(const Problem& p, const FrameworkOptions&) const {
  // No vendor library is involved: the options change nothing.
  return swiglu::make_framework(p);
}

} // namespace tp::ops
