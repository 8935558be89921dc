// Config checks against a target arch, from the tuner's knob spaces and resource estimates.
#include "pilot/ConfigCheck.h"

#include <algorithm>
#include <vector>

#include "autotune/ConfigSpace.h"

namespace tp::pilot {

std::string arch_problem(const std::string& arch) {
  try {
    autotune::TargetLimits::for_arch(arch);
    return "";
  } catch (const UserError& e) {
    std::string w = e.what();
    return w.rfind("error: ", 0) == 0 ? w.substr(7) : w;
  }
}

std::string config_problem(const ops::Operator& op, const ops::Problem& p, const std::string& arch,
                           const ops::Config& c) {
  if (std::string why = arch_problem(arch); !why.empty()) return why;
  if (std::string why = op.unsupported_on(p, arch); !why.empty()) return why;
  // Knobs of sm_90a's TMA and warp-specialized schedules, with the value that means "off".
  static const std::vector<std::pair<std::string, int64_t>> kSm90Only = {
      {"persistent", 0}, {"cluster", 1}, {"overlap", 0}, {"pingpong", 0}};
  if (arch != "sm_90a")
    for (const auto& [k, off] : kSm90Only)
      if (auto v = c.find(k); v != c.end() && v->second != off)
        return k + "=" + std::to_string(v->second) + " is not available on " + arch +
               " (it needs sm_90a's TMA and warp specialization); set " + k + "=" +
               std::to_string(off) + " or drop it";
  autotune::Candidate est = autotune::estimate(op, p, autotune::TargetLimits::for_arch(arch), c);
  if (est.category == "smem" || est.category == "invalid")
    return "config " + ops::config_str(c) + " cannot run " + p.shape_str() + " " +
           dtype_name(p.dtype) + " on " + arch + ": " + est.reason +
           "; pin a smaller config (e.g. fewer stages or smaller tiles) or drop the dtype";
  return "";
}

} // namespace tp::pilot
