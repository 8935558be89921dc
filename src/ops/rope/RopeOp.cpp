// RopeOp: the Operator over RoPE's kernel, references and framework chain.
#include "ops/rope/RopeOp.h"

#include <algorithm>

#include "ops/rope/Rope.h"
#include "ops/rope/RopeFramework.h"
#include "tilepilot/error.h"

namespace tp::ops {

std::string RopeOp::summary() const {
  return "q, k [T, heads, D] rotated by position (HF Llama rotate-half, inv_freq = "
         "base^(-2i/D) with Llama-3 scaling); outputs q_out, k_out";
}

std::vector<std::pair<std::string, std::string>> RopeOp::shape_keys() const {
  return {{"T", "tokens"},
          {"H", "query heads: q is [T, H, D]"},
          {"Hkv", "key heads: k is [T, Hkv, D]"},
          {"D", "head dim (even; rotate-half pairs i with i + D/2)"},
          {"base", "rope theta (default 500000, Llama-3)"},
          {"start", "position of token 0 in make_args: pos = start + t (default 0: a prefill)"},
          {"scaling", "llama3 (Llama-3.1's rope_scaling, default) or none"}};
}

Problem RopeOp::parse(const std::map<std::string, std::string>& kv, DType dtype) const {
  return rope::parse(kv, dtype);
}

Problem RopeOp::problem_for(const std::vector<std::vector<int64_t>>& shapes,
                            const std::vector<DType>& dtypes,
                            const std::map<std::string, std::string>& options) const {
  if (shapes.size() != 5)
    user_error() << "rope: takes 5 tensors (q, k, pos, q_out, k_out), got " << shapes.size();
  const std::vector<int64_t>&q = shapes[0], &k = shapes[1];
  if (q.size() != 3 || k.size() != 3)
    user_error() << "rope: q and k must be 3-d [T, heads, D], got " << q.size() << " and "
                 << k.size() << " dimensions";
  if (k[0] != q[0] || k[2] != q[2])
    user_error() << "rope: tensor 'k' must be [T, Hkv, D] = [" << q[0] << ", Hkv, " << q[2]
                 << "] like q, got [" << k[0] << ", " << k[1] << ", " << k[2] << "]";
  if (shapes[2] != std::vector<int64_t>{q[0]} || dtypes.at(2) != DType::i32)
    user_error() << "rope: tensor 'pos' must be i32 [T] = [" << q[0] << "], one position per token";
  if (shapes[3] != q || shapes[4] != k)
    user_error() << "rope: q_out and k_out must have the shapes of q and k";
  for (int i : {1, 3, 4})
    if (dtypes.at(i) != dtypes[0])
      user_error() << "rope: tensor '"
                   << (i == 1   ? "k"
                       : i == 3 ? "q_out"
                                : "k_out")
                   << "' is " << dtype_name(dtypes[i]) << " but q is " << dtype_name(dtypes[0])
                   << "; q, k and the outputs share one dtype";
  std::map<std::string, std::string> kv = {{"T", std::to_string(q[0])},
                                           {"H", std::to_string(q[1])},
                                           {"Hkv", std::to_string(k[1])},
                                           {"D", std::to_string(q[2])}};
  for (const auto& [key, v] : options) {
    if (key != "base" && key != "scaling")
      user_error() << "rope: unknown option '" << key << "'; options are base and scaling";
    kv[key] = v;
  }
  return rope::parse(kv, dtypes[0]);
}

Problem RopeOp::problem_from_inputs(const std::vector<std::vector<int64_t>>& shapes,
                                    const std::vector<DType>& dtypes,
                                    const std::map<std::string, std::string>& options) const {
  if (shapes.size() != 3) user_error() << "rope: takes 3 inputs (q, k, pos), got " << shapes.size();
  // q_out and k_out take q's and k's shapes and dtypes.
  return problem_for({shapes[0], shapes[1], shapes[2], shapes[0], shapes[1]},
                     {dtypes.at(0), dtypes.at(1), dtypes.at(2), dtypes[0], dtypes[1]}, options);
}

std::string RopeOp::variant_label(const Problem& p) const {
  return rope::llama3_scaled(p) ? "llama3" : "none";
}

std::vector<Knob> RopeOp::knobs(const std::string& arch) const {
  if (arch == "cpu")
    return {{"tokens", {1}, "tokens per block", 1, 16},
            {"threads", {128}, "threads per block (a multiple of 32)", 32, 1024, 0, 32}};
  return {
      {"tokens", {1, 2, 4}, "tokens per block", 1, 16},
      {"threads", {64, 128, 256, 512}, "threads per block (a multiple of 32)", 32, 1024, 0, 32}};
}

Config RopeOp::default_config(const Problem& p, const std::string& arch) const {
  return rope::default_config(p, arch);
}

void RopeOp::validate(const Problem& p, const Config& c) const {
  rope::validate(p, c);
}

Kernel RopeOp::build(const Problem& p, const Config& c) const {
  return rope::build(p, c);
}

std::vector<ArgSpec> RopeOp::arg_specs(const Problem& p) const {
  const std::vector<int64_t> q = {p.at("T"), p.at("H"), p.at("D")};
  const std::vector<int64_t> k = {p.at("T"), p.at("Hkv"), p.at("D")};
  return {{p.dtype, q}, {p.dtype, k}, {DType::i32, {p.at("T")}}, {p.dtype, q}, {p.dtype, k}};
}

std::vector<HostTensor> RopeOp::make_args(const Problem& p, uint64_t seed) const {
  return rope::make_args(p, seed);
}

double RopeOp::flops(const Problem& p) const {
  // Per output element two multiplies and an add; cos and sin once per (token, frequency).
  return 3.0 * p.at("T") * (p.at("H") + p.at("Hkv")) * p.at("D");
}

double RopeOp::min_bytes(const Problem& p) const {
  const double elems = static_cast<double>(p.at("T")) * (p.at("H") + p.at("Hkv")) * p.at("D");
  return 2 * elems * dtype_bytes(p.dtype) + 4.0 * p.at("T");
}

std::vector<double> RopeOp::reference(const Problem& p, const std::vector<HostTensor>& args,
                                      const Box& box) const {
  return rope::reference(p, args, box.tensor, box.min[0], box.extent[0], box.min[1], box.extent[1],
                         box.min[2], box.extent[2]);
}

std::string RopeOp::framework_name() const {
  return rope::kFrameworkName;
}

std::unique_ptr<Framework> RopeOp::framework(const Problem& p, const FrameworkOptions&) const {
  // No vendor library is involved: the options change nothing.
  return rope::make_framework(p);
}

Problem RopeOp::tuning_problem(const Problem& p) const {
  Problem t = p;
  t.shape["start"] = 0;
  return t;
}

} // namespace tp::ops
