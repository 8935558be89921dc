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
  autotune::Candidate est = autotune::estimate(op, p, autotune::TargetLimits::for_arch(arch), c);
  // An invalid config's reason says how to fix it (check_config's words); one that does not fit
  // in shared memory needs a smaller one.
  const std::string head = "config " + ops::config_str(c) + " cannot run " + p.shape_str() + " " +
                           dtype_name(p.dtype) + " on " + arch + ": " + est.reason;
  if (est.category == "invalid") return head;
  if (est.category == "smem")
    return head + "; pin a smaller config (e.g. fewer stages or smaller tiles) or drop the dtype";
  return "";
}

} // namespace tp::pilot
