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
    for (const Knob& kn : op->knobs())
      j["config_space"][kn.name] = {{"values", kn.values}, {"help", kn.help}};
    all.push_back(j);
  }
  return all;
}

} // namespace tp::ops
