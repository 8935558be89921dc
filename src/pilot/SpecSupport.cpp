// The pilot spec's accessors and its JSON form (the parser is in Spec.cpp).
#include "pilot/Spec.h"

#include <algorithm>

namespace tp::pilot {

ops::Problem ShapeEntry::problem(const std::string& op, DType dtype) const {
  return ops::find_operator(op).parse(kv, dtype);
}

ops::Config pinned_config(const ops::Operator& op, const ops::Problem& p, const std::string& arch,
                          const ops::Config& pinned) {
  ops::Config c = op.default_config(p, arch);
  for (const auto& [k, v] : pinned)
    c[k] = v;
  return c;
}

bool PilotSpec::wants(const std::string& metric) const {
  return std::find(metrics.begin(), metrics.end(), metric) != metrics.end();
}

const std::vector<std::string>& spec_top_level_keys() {
  static const std::vector<std::string> keys = {
      "operator",        "device", "dtypes",  "shapes",   "reference", "tolerance", "objective",
      "memory_limit_mb", "model",  "metrics", "fallback", "seed",      "config",    "inject_fault"};
  return keys;
}

nlohmann::json to_json(const PilotSpec& s) {
  nlohmann::json j;
  j["operator"] = s.op;
  j["device"] = s.device;
  for (DType t : s.dtypes)
    j["dtypes"].push_back(dtype_name(t));
  auto shapes = [](const std::vector<ShapeEntry>& v, bool weighted) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : v) {
      nlohmann::json x;
      for (const auto& [k, val] : e.kv)
        x[k] = val;
      if (weighted) x["weight"] = e.weight;
      a.push_back(x);
    }
    return a;
  };
  j["shapes"]["representative"] = shapes(s.representative, true);
  j["shapes"]["edge"] = shapes(s.edge, false);
  j["reference"] = s.reference;
  j["tolerance"] = {{"atol", s.atol}, {"rtol", s.rtol}};
  j["objective"] = {
      {"metric", s.objective_metric}, {"min_speedup", s.min_speedup}, {"route", s.route}};
  j["memory_limit_mb"] = s.memory_limit_mb;
  if (s.has_model) j["model"] = {{"path", s.model.path}, {"config", s.model.config}};
  j["metrics"] = s.metrics;
  j["fallback"] = s.fallback;
  j["seed"] = s.seed;
  j["config"] = s.config;
  if (!s.inject_fault.empty()) j["inject_fault"] = s.inject_fault;
  j["warnings"] = s.warnings;
  j["file"] = s.file;
  return j;
}

} // namespace tp::pilot
