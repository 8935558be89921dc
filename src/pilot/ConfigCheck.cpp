// Config checks against a target arch, from the tuner's knob spaces and resource estimates.
#include "pilot/ConfigCheck.h"

#include <algorithm>

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
  // A knob that sm_90a can vary but `arch` fixes to one value exists only on sm_90a.
  if (arch != "sm_90a") {
    std::vector<ops::Knob> full = autotune::knob_space(op, "sm_90a"),
                           here = autotune::knob_space(op, arch);
    for (const ops::Knob& k : here) {
      auto f = std::find_if(full.begin(), full.end(), [&](auto& x) { return x.name == k.name; });
      auto v = c.find(k.name);
      if (f == full.end() || v == c.end() || k.values.size() != 1 || f->values.size() < 2)
        continue;
      if (v->second != k.values[0])
        return k.name + "=" + std::to_string(v->second) + " is not available on " + arch +
               " (it needs sm_90a's TMA and warp specialization); set " + k.name + "=" +
               std::to_string(k.values[0]) + " or drop it";
    }
  }
  autotune::Candidate est =
      autotune::estimate(op, p, autotune::TargetLimits::for_arch(arch), c);
  if (est.category == "smem" || est.category == "invalid")
    return "config " + ops::config_str(c) + " cannot run " + p.shape_str() + " " +
           dtype_name(p.dtype) + " on " + arch + ": " + est.reason +
           "; pin a smaller config (e.g. fewer stages or smaller tiles) or drop the dtype";
  return "";
}

} // namespace tp::pilot
