// The operator catalogue as JSON (Catalog.h).
#include "ops/Catalog.h"

#include "ops/Operator.h"

namespace tp::ops {

nlohmann::json catalog_json() {
  nlohmann::json all = nlohmann::json::array();
  for (const Operator* op : all_operators()) {
    nlohmann::json j;
    j["name"] = op->name();
    j["summary"] = op->summary();
    for (const auto& [k, help] : op->shape_keys())
      j["shape_keys"][k] = help;
    j["origin"] = operator_origin(op->name());
    j["framework"] = op->framework_name();
    // The config space as the flagship arch searches it; each knob's accepted range too.
    for (const Knob& kn : op->knobs("sm_90a")) {
      nlohmann::json k = {{"values", kn.values}, {"help", kn.help}, {"neutral", kn.neutral}};
      if (kn.min != 0 || kn.max != 0) k["range"] = {kn.min, kn.max};
      j["config_space"][kn.name] = k;
    }
    all.push_back(j);
  }
  return all;
}

} // namespace tp::ops
