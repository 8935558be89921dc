// How a side-by-side measurement is reported by `tilepilot bench`: one JSON object (the CLI
// contract in DESIGN.md: op, shape, dtype, config, device, ms_median, ms_iqr, tflops, ref_name,
// ref_ms_median, ref_tflops, speedup, plus IQRs, compile phases, the check and the options) and
// a few lines of text. Numbers that were not measured are null in JSON and absent in text.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "ops/Operator.h"
#include "perf/SideBySide.h"

namespace tp::perf {

nlohmann::json to_json(const SideBySide& s, const ops::Problem& p, const rt::TimingOptions& o);

std::string to_text(const SideBySide& s, const ops::Problem& p, const rt::TimingOptions& o);

} // namespace tp::perf
