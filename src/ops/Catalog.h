// The operator catalogue as JSON: each operator's name, summary, shape keys and config space.
// `tilepilot ops --json` prints it and the Python package's tilepilot.ops() returns it: one
// contract for both.
#pragma once
#include <nlohmann/json.hpp>

namespace tp::ops {

nlohmann::json catalog_json();

} // namespace tp::ops
