// Small parsing helpers shared by the operators' problem parsers, and the shape text their
// messages print.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace tp::ops {

/// The positive integer value of `key`; user error naming the operator and key otherwise.
int64_t require_positive(const std::map<std::string, std::string>& kv, const std::string& key,
                         const std::string& op, const std::string& example);
/// Like require_positive, but `dflt` when absent; `allow_zero` accepts 0.
int64_t optional_int(const std::map<std::string, std::string>& kv, const std::string& key,
                     int64_t dflt, const std::string& op, bool allow_zero = false);
/// User error for keys not in `known`.
void reject_unknown(const std::map<std::string, std::string>& kv,
                    const std::vector<std::string>& known, const std::string& op);
/// "[4, 32, 128]": a tensor's shape in messages.
std::string shape_text(const std::vector<int64_t>& shape);

} // namespace tp::ops
