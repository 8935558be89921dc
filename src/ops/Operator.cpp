// Operator registry, problem helpers and key=value parsing shared by the CLI and the pilot.
#include "ops/Operator.h"

#include <sstream>

#include "ops/AttentionOp.h"
#include "ops/GemmOp.h"

namespace tp::ops {

int64_t Problem::at(const std::string& k) const {
  auto it = shape.find(k);
  internal_assert(it != shape.end()) << op << " problem has no key " << k;
  return it->second;
}

int64_t Problem::get(const std::string& k, int64_t dflt) const {
  auto it = shape.find(k);
  return it == shape.end() ? dflt : it->second;
}

std::string Problem::shape_str() const {
  std::string s;
  for (const auto& [k, v] : shape)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  for (const auto& [k, v] : options)
    s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

std::pair<double, double> Operator::tolerance(DType t) const {
  switch (t) {
  case DType::bf16:
    return {2e-2, 2e-2};
  case DType::f16:
    return {1e-2, 1e-2};
  default:
    return {1e-4, 1e-4};
  }
}

const Operator& find_operator(const std::string& name) {
  for (const Operator* op : all_operators())
    if (op->name() == name) return *op;
  std::string known;
  for (const Operator* op : all_operators())
    known += (known.empty() ? "" : ", ") + op->name();
  user_error() << "unknown operator '" << name << "'; known operators: " << known;
  std::abort();
}

std::vector<const Operator*> all_operators() {
  static GemmOp gemm;
  static AttentionOp attention;
  return {&gemm, &attention};
}

std::map<std::string, std::string> parse_kv(const std::string& text, const char* what) {
  std::map<std::string, std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      user_error() << "malformed " << what << " '" << text << "': '" << item
                   << "' is not key=value; write e.g. M=128,N=256,K=64";
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (out.count(k)) user_error() << "malformed " << what << ": key '" << k << "' given twice";
    out[k] = v;
  }
  return out;
}

Config parse_config(const std::string& text) {
  Config c;
  for (const auto& [k, v] : parse_kv(text, "--config")) {
    try {
      size_t pos = 0;
      long long x = std::stoll(v, &pos);
      if (pos != v.size()) throw std::invalid_argument(v);
      c[k] = x;
    } catch (const std::exception&) {
      user_error() << "malformed --config: " << k << "=" << v << " is not an integer";
    }
  }
  return c;
}

Problem parse_problem(const std::string& op, const std::map<std::string, std::string>& kv,
                      DType dtype) {
  return find_operator(op).parse(kv, dtype);
}

std::string config_str(const Config& c) {
  std::string s;
  for (const auto& [k, v] : c)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

} // namespace tp::ops
