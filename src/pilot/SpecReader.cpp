// Located, typed YAML access for the spec parser.
#include "pilot/SpecReader.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tilepilot/error.h"

namespace tp::pilot {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = std::tolower(a[i - 1]) == std::tolower(b[j - 1]);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

const char* kind_name(const YAML::Node& n) {
  switch (n.Type()) {
  case YAML::NodeType::Map:
    return "a map";
  case YAML::NodeType::Sequence:
    return "a list";
  case YAML::NodeType::Null:
    return "nothing";
  case YAML::NodeType::Scalar:
    return "a scalar";
  default:
    return "an undefined node";
  }
}

} // namespace

std::string closest_key(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1; // close enough to be a typo
  for (const auto& k : known) {
    size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

void SpecReader::fail(const YAML::Mark& at, const std::string& what, const std::string& fix) const {
  // Thrown directly rather than through user_error(): spec diagnostics carry a column and use
  // the compiler-style "FILE:LINE:COL: error:" prefix that editors jump to.
  int line = at.line >= 0 ? at.line + 1 : 1, col = at.column >= 0 ? at.column + 1 : 1;
  throw UserError(SourceLoc{file_, line}, file_ + ":" + std::to_string(line) + ":" +
                                              std::to_string(col) + ": error: " + what + "; " +
                                              fix);
}

void SpecReader::check_map(const YAML::Node& n, const std::vector<std::string>& known,
                           const std::string& where, const std::string& example) const {
  if (!n.IsMap()) fail(n, where + " must be a map, got " + kind_name(n), "write e.g. " + example);
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) fail(it->first, "a key of " + where + " is not a name", example);
    std::string k = it->first.Scalar();
    if (!seen.insert(k).second)
      fail(it->first, where + ": key '" + k + "' is given twice", "keep one of them");
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    std::string near = closest_key(k, known), list;
    for (const auto& s : known)
      list += (list.empty() ? "" : ", ") + s;
    fail(it->first, "unknown key '" + k + "' in " + where,
         near.empty() ? "known keys: " + list : "did you mean '" + near + "'? known keys: " + list);
  }
}

YAML::Node SpecReader::require(const YAML::Node& map, const std::string& key,
                               const std::string& where, const std::string& example) const {
  YAML::Node v = map[key];
  if (!v.IsDefined() || v.IsNull())
    fail(map, where + " is missing the required field '" + key + "'", "add e.g. " + example);
  return v;
}

std::string SpecReader::string(const YAML::Node& n, const std::string& what,
                               const std::string& example) const {
  if (!n.IsScalar())
    fail(n, what + " must be a single value, got " + kind_name(n), "write e.g. " + example);
  return n.Scalar();
}

double SpecReader::number(const YAML::Node& n, const std::string& what,
                          const std::string& example) const {
  std::string s = string(n, what, example);
  try {
    size_t pos = 0;
    double v = std::stod(s, &pos);
    if (pos == s.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {}
  fail(n, what + " must be a number, got '" + s + "'", "write e.g. " + example);
}

int64_t SpecReader::integer(const YAML::Node& n, const std::string& what,
                            const std::string& example) const {
  std::string s = string(n, what, example);
  try {
    size_t pos = 0;
    long long v = std::stoll(s, &pos);
    if (pos == s.size()) return v;
  } catch (const std::exception&) {}
  fail(n, what + " must be an integer, got '" + s + "'", "write e.g. " + example);
}

std::vector<YAML::Node> SpecReader::list(const YAML::Node& n, const std::string& what,
                                         const std::string& example) const {
  if (!n.IsSequence())
    fail(n, what + " must be a list, got " + kind_name(n), "write e.g. " + example);
  std::vector<YAML::Node> out;
  for (const auto& x : n)
    out.push_back(x);
  return out;
}

} // namespace tp::pilot
