// Parsing helpers for operator problems.
#include "ops/ParseHelpers.h"

#include <algorithm>
#include <vector>

#include "tilepilot/error.h"

namespace tp::ops {

namespace {

constexpr int64_t kMaxDim = 2147483647; // 2^31 - 1

bool to_int(const std::string& v, int64_t* out) {
  try {
    size_t pos = 0;
    long long x = std::stoll(v, &pos);
    if (pos != v.size()) return false;
    *out = x;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}
/// Kernels index each dimension with 32-bit integers.
void check_representable(const std::string& op, const std::string& key, int64_t v) {
  if (v > kMaxDim)
    user_error() << op << ": " << key << "=" << v << " is larger than " << kMaxDim
                 << ", the largest size a kernel indexes (32-bit); use a smaller " << key;
}

} // namespace

int64_t require_positive(const std::map<std::string, std::string>& kv, const std::string& key,
                         const std::string& op, const std::string& example) {
  auto it = kv.find(key);
  if (it == kv.end())
    user_error() << op << ": --shape is missing " << key << "; write e.g. --shape " << example;
  int64_t v;
  if (!to_int(it->second, &v) || v <= 0)
    user_error() << op << ": " << key << "=" << it->second
                 << " is not a positive integer; write e.g. --shape " << example;
  check_representable(op, key, v);
  return v;
}

int64_t optional_int(const std::map<std::string, std::string>& kv, const std::string& key,
                     int64_t dflt, const std::string& op, bool allow_zero) {
  auto it = kv.find(key);
  if (it == kv.end()) return dflt;
  int64_t v;
  if (!to_int(it->second, &v) || v < 0 || (v == 0 && !allow_zero))
    user_error() << op << ": " << key << "=" << it->second << " is not a "
                 << (allow_zero ? "non-negative" : "positive") << " integer";
  check_representable(op, key, v);
  return v;
}

void reject_unknown(const std::map<std::string, std::string>& kv,
                    const std::vector<std::string>& known, const std::string& op) {
  for (const auto& [k, v] : kv)
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      std::string list;
      for (const auto& s : known)
        list += (list.empty() ? "" : ", ") + s;
      user_error() << op << ": unknown shape key '" << k << "'; known keys: " << list;
    }
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace tp::ops
