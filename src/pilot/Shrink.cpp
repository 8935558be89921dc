// Greedy shrinking of failing cases.
#include "pilot/Shrink.h"

#include <set>
#include <sstream>

namespace tp::pilot {

namespace {

using KV = std::map<std::string, std::string>;

KV to_kv(const ops::Problem& p) {
  KV kv;
  for (const auto& [k, v] : p.shape)
    kv[k] = std::to_string(v);
  for (const auto& [k, v] : p.options)
    kv[k] = v;
  return kv;
}

/// Keeps a padded batch consistent with B and Skv.
void fix_lens(KV& kv) {
  auto it = kv.find("lens");
  if (it == kv.end()) return;
  int64_t B = std::stoll(kv.at("B")), Skv = std::stoll(kv.at("Skv"));
  std::stringstream ss(it->second);
  std::string item, out;
  for (int64_t b = 0; b < B && std::getline(ss, item, ':'); ++b)
    out += (out.empty() ? "" : ":") + std::to_string(std::min<int64_t>(std::stoll(item), Skv));
  it->second = out;
}

/// Candidate edits, most aggressive first: each sets some keys to new values.
std::vector<std::map<std::string, int64_t>> candidates(const ops::Problem& p) {
  static const std::vector<std::string> keys = {"M", "N", "K", "B", "H", "Hkv", "S", "Skv", "D"};
  static const std::vector<std::pair<std::string, std::string>> pairs = {{"H", "Hkv"},
                                                                         {"S", "Skv"}};
  std::vector<std::map<std::string, int64_t>> out;
  for (const auto& [a, b] : pairs)
    if (p.shape.count(a) && p.shape.count(b) && p.at(a) > 1 && p.at(b) > 1) {
      out.push_back({{a, 1}, {b, 1}});
      out.push_back({{a, p.at(a) / 2}, {b, p.at(b) / 2}});
    }
  for (const auto& k : keys) {
    auto it = p.shape.find(k);
    if (it == p.shape.end() || it->second <= 1) continue;
    out.push_back({{k, 1}});
    if (it->second / 2 > 1) out.push_back({{k, it->second / 2}});
  }
  return out;
}

double size_of(const ops::Problem& p) {
  double s = 1;
  for (const auto& [k, v] : p.shape)
    s *= static_cast<double>(std::max<int64_t>(v, 1));
  return s;
}

} // namespace

ShrinkResult shrink_failure(const ops::Operator& op, const ops::Problem& start,
                            const ops::CheckResult& start_result,
                            const std::function<ops::CheckResult(const ops::Problem&)>& run,
                            int max_attempts) {
  ShrinkResult res;
  res.problem = start;
  res.result = start_result;
  std::set<std::string> tried;
  bool progress = true;
  while (progress && res.attempts < max_attempts) {
    progress = false;
    for (const auto& edit : candidates(res.problem)) {
      if (res.attempts >= max_attempts) break;
      KV kv = to_kv(res.problem);
      for (const auto& [k, v] : edit)
        kv[k] = std::to_string(v);
      fix_lens(kv);
      ops::Problem cand;
      try {
        cand = op.parse(kv, res.problem.dtype);
      } catch (const UserError&) {
        continue; // e.g. H no longer a multiple of Hkv: not a valid problem
      }
      if (size_of(cand) >= size_of(res.problem) || !tried.insert(cand.shape_str()).second) continue;
      ++res.attempts;
      ops::CheckResult r;
      try {
        r = run(cand);
      } catch (const UserError&) {
        continue; // the config does not fit the smaller problem
      }
      if (r.passed) continue;
      res.steps.push_back({{"from", res.problem.shape_str()}, {"to", cand.shape_str()}});
      res.problem = cand;
      res.result = r;
      progress = true;
      break; // restart from the most aggressive edits of the smaller problem
    }
  }
  return res;
}

} // namespace tp::pilot
