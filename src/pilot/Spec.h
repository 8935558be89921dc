// The pilot spec (DESIGN.md, "The pilot spec"): one operator on one device, a fixed shape
// distribution (weighted representative shapes + edge cases), a framework reference, tolerance,
// a latency objective, a memory limit, an optional model path, the metrics to measure and the
// fallback policy. Parsing is strict: every error names the file, line and column, says what is
// wrong and how to fix it, and is a user error (exit status 2).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ops/Operator.h"

namespace tp::pilot {

/// One shape entry of the distribution, as written (list-valued options joined with
/// ':'), with its normalized weight (0 for edge shapes) and where it was written.
struct ShapeEntry {
  std::map<std::string, std::string> kv;
  double weight = 0;
  bool representative = false;
  int line = 0, column = 0; // 1-based
  /// The validated problem for `dtype`.
  ops::Problem problem(const std::string& op, DType dtype) const;
};

struct ModelSpec {
  std::string path; // a model path under models/, e.g. llama-prefill
  std::map<std::string, std::string> config;
};

struct PilotSpec {
  std::string file; // the path the spec was read from (diagnostics, report)
  std::string text; // the spec as written (echoed into the report and the release manifest)
  std::string op;
  std::string device; // NVRTC arch, e.g. sm_90a
  std::vector<DType> dtypes;
  std::vector<ShapeEntry> representative, edge;
  std::string reference = "framework";
  double atol = 0, rtol = 0;
  std::string objective_metric = "weighted_latency";
  double min_speedup = 1.0;
  /// objective.route: "all" (the kernel serves every tested shape) or "per_shape" (each tested
  /// shape is served by whichever the pilot measured faster, the kernel or the framework).
  std::string route = "all";
  double memory_limit_mb = 0;
  bool has_model = false;
  ModelSpec model;
  std::vector<std::string> metrics; // subset of correctness, compile, warm, model, memory, autotune
  std::string fallback = "required"; // required | optional
  uint64_t seed = 0;
  ops::Config config;                // pinned knobs (over the target arch's default); empty: none
  std::string inject_fault;          // test-only: "" or "wrong_scale" (see FaultyOperator.h)
  std::vector<std::string> warnings; // e.g. weights normalized

  bool wants(const std::string& metric) const;
};

/// The config a problem runs with when the spec pins `pinned` (possibly only some knobs): the
/// target arch's default with the pinned knobs overriding it.
ops::Config pinned_config(const ops::Operator& op, const ops::Problem& p, const std::string& arch,
                          const ops::Config& pinned);

/// Reads and validates a spec file; user error "FILE:LINE:COL: error: <what>; <fix>".
PilotSpec load_spec(const std::string& path);
/// Same, from text; `file` names it in diagnostics.
PilotSpec parse_spec(const std::string& text, const std::string& file);

/// The spec as JSON (normalized: defaults filled in, weights normalized).
nlohmann::json to_json(const PilotSpec& s);

/// Keys and value kinds the spec accepts, for suggestions ("did you mean ...?").
const std::vector<std::string>& spec_top_level_keys();

} // namespace tp::pilot
