// The operator library's internal side of the Operator interface (tilepilot/operator.h):
// key=value parsing shared by the CLI, the tuner and the pilot.
#pragma once
#include <map>
#include <string>

#include "tilepilot/operator.h"

namespace tp::ops {

/// Parses "k=v,k=v" into pairs; user error on malformed text.
std::map<std::string, std::string> parse_kv(const std::string& text, const char* what);
/// Integer knobs from "bm=128,stages=3"; user error on malformed text. Knob names and ranges
/// are checked by validate_knobs, against the operator.
Config parse_config(const std::string& text);

} // namespace tp::ops
