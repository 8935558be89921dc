// The operator library's internal side of the Operator interface (tilepilot/operator.h):
// key=value parsing shared by the CLI, the tuner and the pilot.
#pragma once
#include <map>
#include <string>

#include "tilepilot/operator.h"

namespace tp::ops {

/// Parses "k=v,k=v" into pairs; user error on malformed text.
std::map<std::string, std::string> parse_kv(const std::string& text, const char* what);
/// One knob value as text (a flag, a `|` list of the tuner's space): a non-negative integer;
/// user error naming `where` and the knob otherwise. Names and ranges are check_config's.
int64_t parse_knob_value(const std::string& knob, const std::string& text,
                         const std::string& where);
/// Integer knobs from "bm=128,stages=3"; user error on malformed text.
Config parse_config(const std::string& text);

} // namespace tp::ops
