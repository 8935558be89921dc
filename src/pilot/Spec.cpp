// The pilot spec parser. Fields are read in dependency order (operator before shapes, shapes
// before dtypes, ...) so that each error can point at the node that is actually wrong.
#include "pilot/Spec.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "pilot/ConfigCheck.h"
#include "pilot/ModelBackend.h"
#include "pilot/SpecReader.h"
#include "release/Files.h"

namespace tp::pilot {

namespace {

const std::vector<std::string> kMetrics = {"correctness", "compile", "warm",
                                           "model",       "memory",  "autotune"};
const std::vector<std::string> kFaults = {"wrong_scale"};

/// "error: OP: key=xy is not supported; use a or b" -> {what, fix}.
std::pair<std::string, std::string> split_message(std::string msg, const std::string& dflt_fix) {
  if (msg.rfind("error: ", 0) == 0) msg = msg.substr(7);
  // Operator messages are phrased for the CLI's --shape; in a spec the shape is a map entry.
  for (auto [from, to] : {std::pair<std::string, std::string>{"--shape is missing", "missing"},
                          {"write e.g. --shape ", "write e.g. "}})
    if (auto at = msg.find(from); at != std::string::npos) msg.replace(at, from.size(), to);
  auto semi = msg.find("; ");
  if (semi == std::string::npos) return {msg, dflt_fix};
  return {msg.substr(0, semi), msg.substr(semi + 2)};
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v)
    s += (s.empty() ? "" : ", ") + x;
  return s;
}

class Parser {
public:
  Parser(const std::string& text, const std::string& file) : r_(file) {
    s_.file = file;
    s_.text = text;
    try {
      root_ = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      r_.fail(e.mark, "YAML syntax: " + e.msg,
              "check the indentation, colons and brackets at that point");
    }
  }

  PilotSpec parse() {
    if (!root_.IsMap())
      r_.fail(root_, "the spec must be a map of fields",
              "start from a spec in examples/pilots/ (operator: <name>, device: sm_90a, ...)");
    r_.check_map(root_, spec_top_level_keys(), "the spec", "operator: <name>");
    parse_operator();
    parse_device();
    parse_shapes();
    parse_dtypes();
    validate_shapes();
    parse_scalars();
    parse_metrics();
    parse_config();
    validate_configs();
    return s_;
  }

private:
  YAML::Node need(const std::string& key, const std::string& example) {
    return r_.require(root_, key, "the spec", example);
  }

  void parse_operator() {
    YAML::Node n = need("operator", "operator: <name from `tilepilot ops`>");
    s_.op = r_.string(n, "operator", "operator: <name from `tilepilot ops`>");
    std::vector<std::string> names;
    for (const ops::Operator* o : ops::all_operators())
      names.push_back(o->name());
    if (std::find(names.begin(), names.end(), s_.op) == names.end()) {
      std::string near = closest_key(s_.op, names);
      r_.fail(n, "unknown operator '" + s_.op + "'",
              (near.empty() ? "" : "did you mean '" + near + "'? ") +
                  "known operators: " + join(names));
    }
    op_ = &ops::find_operator(s_.op);
  }

  void parse_device() {
    YAML::Node n = need("device", "device: sm_90a");
    s_.device = r_.string(n, "device", "device: sm_90a");
    if (!std::regex_match(s_.device, std::regex("sm_[0-9]{2,3}a?")))
      r_.fail(n, "device '" + s_.device + "' is not a GPU architecture",
              "write the NVRTC target, e.g. device: sm_90a for H100/H200");
    if (!arch_problem(s_.device).empty())
      r_.fail(n, "device '" + s_.device + "' is not supported by this build",
              "use sm_90a (H100/H200) or sm_80 (A100)");
  }

  void parse_shapes() {
    YAML::Node n = need("shapes", "shapes: {representative: [{M: 4096, N: 4096, K: 4096}]}");
    r_.check_map(n, {"representative", "edge"}, "shapes",
                 "shapes: {representative: [...], edge: [...]}");
    YAML::Node rep = r_.require(n, "representative", "shapes",
                                "representative: [{M: 4096, N: 4096, K: 4096, weight: 1}]");
    for (const auto& e : r_.list(rep, "shapes.representative", "[{M: 4096, weight: 1}]"))
      s_.representative.push_back(shape(e, true, s_.representative.size()));
    if (s_.representative.empty())
      r_.fail(rep, "shapes.representative is empty",
              "list at least one shape that the model runs, with its weight");
    if (YAML::Node edge = n["edge"]; edge.IsDefined() && !edge.IsNull())
      for (const auto& e : r_.list(edge, "shapes.edge", "[{M: 1, N: 45, K: 133}]"))
        s_.edge.push_back(shape(e, false, s_.edge.size()));
    normalize_weights();
  }

  ShapeEntry shape(const YAML::Node& e, bool rep, size_t i) {
    std::string where =
        std::string("shapes.") + (rep ? "representative" : "edge") + "[" + std::to_string(i) + "]";
    std::vector<std::string> known;
    for (const auto& [k, help] : op_->shape_keys())
      known.push_back(k);
    known.push_back("weight");
    r_.check_map(e, known, where, "{" + known[0] + ": 128, ...}");
    ShapeEntry s;
    s.representative = rep;
    s.line = SpecReader::line(e);
    s.column = SpecReader::column(e);
    for (auto it = e.begin(); it != e.end(); ++it) {
      std::string k = it->first.Scalar();
      YAML::Node v = it->second; // a copy: it->second lives in a temporary proxy
      if (k == "weight") {
        if (!rep)
          r_.fail(it->first, where + ": edge shapes carry no weight",
                  "remove weight, or move the shape to shapes.representative");
        s.weight = r_.number(v, where + ".weight", "weight: 0.25");
        if (s.weight <= 0)
          r_.fail(v, where + ".weight must be positive, got " + v.Scalar(),
                  "give each representative shape its share of the model's calls, e.g. 0.25");
        continue;
      }
      if (v.IsSequence()) { // a list-valued option: [5, 77, 3] -> "5:77:3"
        std::string joined;
        for (const auto& x : v)
          joined += (joined.empty() ? "" : ":") + r_.string(x, where + "." + k, "[5, 77, 3]");
        s.kv[k] = joined;
      } else {
        std::string x = r_.string(v, where + "." + k, k + ": 128");
        s.kv[k] = x == "true" ? "1" : x == "false" ? "0" : x;
      }
    }
    if (rep && !e["weight"].IsDefined()) unweighted_.push_back(e);
    for (const ShapeEntry* o : all_shapes())
      if (o->kv == s.kv)
        r_.fail(e, where + " repeats the shape at line " + std::to_string(o->line),
                "remove one of them (weights belong to one entry per shape)");
    return s;
  }

  std::vector<const ShapeEntry*> all_shapes() const {
    std::vector<const ShapeEntry*> v;
    for (const auto& s : s_.representative)
      v.push_back(&s);
    for (const auto& s : s_.edge)
      v.push_back(&s);
    return v;
  }

  void normalize_weights() {
    size_t n = s_.representative.size();
    if (!unweighted_.empty() && unweighted_.size() != n)
      r_.fail(unweighted_.front(), "this representative shape has no weight but others do",
              "give every representative shape a weight (they are normalized to sum to 1)");
    if (unweighted_.size() == n) {
      for (auto& s : s_.representative)
        s.weight = 1.0 / static_cast<double>(n);
      if (n > 1)
        s_.warnings.push_back("no weights given: each representative shape weighs 1/" +
                              std::to_string(n));
      return;
    }
    double sum = 0;
    for (const auto& s : s_.representative)
      sum += s.weight;
    if (!std::isfinite(sum))
      r_.fail(unweighted_.empty() ? root_["shapes"] : unweighted_.front(),
              "the representative weights sum to infinity",
              "weights are relative shares; write them on a smaller scale, e.g. 0.25 each");
    if (std::fabs(sum - 1.0) > 1e-6) {
      std::ostringstream os;
      os << "representative weights sum to " << sum << ", not 1: normalized";
      s_.warnings.push_back(os.str());
    }
    for (auto& s : s_.representative)
      s.weight /= sum;
  }

  void parse_dtypes() {
    YAML::Node n = need("dtypes", "dtypes: [bf16]");
    std::vector<std::string> names = {"bf16", "f16", "f32"};
    for (const auto& d : r_.list(n, "dtypes", "dtypes: [bf16]")) {
      std::string name = r_.string(d, "a dtype", "bf16");
      auto t = parse_dtype(name);
      if (!t || !(*t == DType::bf16 || *t == DType::f16 || *t == DType::f32)) {
        std::string near = closest_key(name, names);
        r_.fail(d, "unknown dtype '" + name + "'",
                (near.empty() ? "" : "did you mean '" + near + "'? ") + "use bf16, f16 or f32");
      }
      if (std::find(s_.dtypes.begin(), s_.dtypes.end(), *t) != s_.dtypes.end())
        r_.fail(d, "dtype '" + name + "' is listed twice", "list each dtype once");
      // A dtype the operator rejects for a shape it otherwise accepts is the dtype's fault.
      try {
        s_.representative.front().problem(s_.op, *t);
      } catch (const UserError& e) {
        bool shape_ok = true;
        try {
          s_.representative.front().problem(s_.op, DType::bf16);
        } catch (const UserError&) {
          shape_ok = false;
        }
        if (shape_ok) {
          auto [what, fix] = split_message(e.what(), "use one of " + join(names));
          r_.fail(d, what, fix);
        }
      }
      s_.dtypes.push_back(*t);
    }
    if (s_.dtypes.empty()) r_.fail(n, "dtypes is empty", "list at least one, e.g. dtypes: [bf16]");
  }

  void validate_shapes() {
    for (const ShapeEntry* s : all_shapes())
      for (DType t : s_.dtypes) {
        try {
          s->problem(s_.op, t);
        } catch (const UserError& e) {
          auto [what, fix] =
              split_message(e.what(), "see `tilepilot ops` for " + s_.op + "'s shape keys");
          YAML::Mark at;
          at.line = s->line - 1;
          at.column = s->column - 1;
          r_.fail(at,
                  std::string("shapes.") + (s->representative ? "representative" : "edge") + ": " +
                      what,
                  fix);
        }
      }
  }

  void parse_scalars() {
    YAML::Node ref = need("reference", "reference: framework");
    s_.reference = r_.string(ref, "reference", "reference: framework");
    if (s_.reference != "framework")
      r_.fail(ref, "reference '" + s_.reference + "' is not supported",
              "write reference: framework (the operator's framework operator, which "
              "`tilepilot ops` names)");

    YAML::Node tol = need("tolerance", "tolerance: {atol: 2e-2, rtol: 2e-2}");
    r_.check_map(tol, {"atol", "rtol"}, "tolerance", "tolerance: {atol: 2e-2, rtol: 2e-2}");
    for (auto [key, out] : {std::pair{"atol", &s_.atol}, std::pair{"rtol", &s_.rtol}}) {
      YAML::Node v = r_.require(tol, key, "tolerance", std::string(key) + ": 2e-2");
      *out = r_.number(v, std::string("tolerance.") + key, std::string(key) + ": 2e-2");
      if (*out < 0)
        r_.fail(v, std::string("tolerance.") + key + " is negative",
                "tolerances are bounds on |out - ref|; use e.g. 2e-2 for bf16");
      if (*out >= 1)
        s_.warnings.push_back(std::string("tolerance.") + key + " " + v.Scalar() +
                              " is so loose that the correctness check can hardly fail; " +
                              "use e.g. 2e-2 for bf16");
    }

    YAML::Node obj = need("objective", "objective: {metric: weighted_latency, min_speedup: 1.1}");
    r_.check_map(obj, {"metric", "min_speedup", "route"}, "objective",
                 "objective: {metric: weighted_latency, min_speedup: 1.1}");
    YAML::Node metric = r_.require(obj, "metric", "objective", "metric: weighted_latency");
    s_.objective_metric = r_.string(metric, "objective.metric", "weighted_latency");
    if (s_.objective_metric != "weighted_latency")
      r_.fail(metric, "objective metric '" + s_.objective_metric + "' is not supported",
              "write metric: weighted_latency (reference time / our time, weighted by shape)");
    YAML::Node sp = r_.require(obj, "min_speedup", "objective", "min_speedup: 1.1");
    s_.min_speedup = r_.number(sp, "objective.min_speedup", "min_speedup: 1.1");
    if (s_.min_speedup <= 0)
      r_.fail(sp, "objective.min_speedup must be positive, got " + sp.Scalar(),
              "it is the speedup over the reference the kernel must reach, e.g. 1.1");
    if (YAML::Node route = obj["route"]; route.IsDefined()) {
      s_.route = r_.string(route, "objective.route", "route: per_shape");
      if (s_.route != "all" && s_.route != "per_shape")
        r_.fail(route, "objective.route '" + s_.route + "' is not a routing",
                "write route: all (the kernel serves every tested shape) or route: per_shape "
                "(each shape goes to whichever the pilot measured faster)");
    }

    YAML::Node mem = need("memory_limit_mb", "memory_limit_mb: 512");
    s_.memory_limit_mb = r_.number(mem, "memory_limit_mb", "memory_limit_mb: 512");
    if (s_.memory_limit_mb <= 0)
      r_.fail(mem, "memory_limit_mb must be positive", "give the peak device memory allowed");

    YAML::Node fb = need("fallback", "fallback: required");
    s_.fallback = r_.string(fb, "fallback", "fallback: required");
    if (s_.fallback != "required" && s_.fallback != "optional")
      r_.fail(fb, "fallback '" + s_.fallback + "' is not a policy",
              "write fallback: required (release only with a tested fallback) or optional");

    if (YAML::Node seed = root_["seed"]; seed.IsDefined()) {
      int64_t v = r_.integer(seed, "seed", "seed: 0");
      if (v < 0) r_.fail(seed, "seed must not be negative", "write e.g. seed: 0");
      s_.seed = static_cast<uint64_t>(v);
    }
    if (YAML::Node f = root_["inject_fault"]; f.IsDefined()) {
      s_.inject_fault = r_.string(f, "inject_fault", "inject_fault: wrong_scale");
      if (std::find(kFaults.begin(), kFaults.end(), s_.inject_fault) == kFaults.end())
        r_.fail(f, "unknown inject_fault '" + s_.inject_fault + "'",
                "the test-only faults are: " + join(kFaults) + "; remove the field for a real run");
    }
    if (YAML::Node m = root_["model"]; m.IsDefined()) {
      r_.check_map(m, {"path", "config"}, "model", "model: {path: llama-prefill}");
      s_.has_model = true;
      s_.model.path = r_.string(r_.require(m, "path", "model", "path: llama-prefill"), "model.path",
                                "path: llama-prefill");
      if (YAML::Node c = m["config"]; c.IsDefined() && !c.IsNull()) {
        if (!c.IsMap()) r_.fail(c, "model.config must be a map", "write e.g. config: {layers: 2}");
        for (auto it = c.begin(); it != c.end(); ++it)
          s_.model.config[it->first.Scalar()] =
              r_.string(it->second, "model.config." + it->first.Scalar(), "layers: 2");
      }
      try {
        validate_model_spec(s_.model);
      } catch (const UserError& e) {
        auto [what, fix] = split_message(e.what(), "see models/README.md for the settings");
        r_.fail(m, "model: " + what, fix);
      }
    }
  }

  void parse_metrics() {
    YAML::Node n = need("metrics", "metrics: [correctness, compile, warm, memory]");
    for (const auto& m : r_.list(n, "metrics", "[correctness, compile, warm, memory]")) {
      std::string name = r_.string(m, "a metric", "warm");
      if (std::find(kMetrics.begin(), kMetrics.end(), name) == kMetrics.end()) {
        std::string near = closest_key(name, kMetrics);
        r_.fail(m, "unknown metric '" + name + "'",
                (near.empty() ? "" : "did you mean '" + near + "'? ") +
                    "known metrics: " + join(kMetrics));
      }
      if (s_.wants(name)) r_.fail(m, "metric '" + name + "' is listed twice", "list it once");
      s_.metrics.push_back(name);
    }
    // The decision needs these: correctness always comes first, the objective is a latency
    // and memory_limit_mb is a required bound.
    for (const char* m : {"correctness", "warm", "memory"})
      if (!s_.wants(m))
        r_.fail(n, std::string("metrics lacks '") + m + "'",
                std::string("add it: the release decision needs ") +
                    (std::string(m) == "warm"     ? "warm latency for the objective"
                     : std::string(m) == "memory" ? "peak memory against memory_limit_mb"
                                                  : "correctness before any timing"));
    if (s_.wants("model") && !s_.has_model)
      r_.fail(n, "metrics lists 'model' but the spec has no model section",
              "add e.g. model: {path: llama-prefill}, or remove 'model' from metrics");
  }

  void parse_config() {
    YAML::Node c = root_["config"];
    if (!c.IsDefined() || c.IsNull()) return;
    if (!c.IsMap()) r_.fail(c, "config must be a map of knobs", "write e.g. config: {bm: 128}");
    // Knob values go through the one knob parser, as --config and --space do.
    for (auto it = c.begin(); it != c.end(); ++it) {
      const std::string k = it->first.Scalar();
      const std::string text = r_.string(it->second, "config." + k, k + ": 128");
      try {
        s_.config[k] = ops::parse_knob_value(k, text, "config." + k);
      } catch (const UserError& e) {
        auto [what, fix] = split_message(e.what(), "write e.g. " + k + ": 128");
        r_.fail(it->second, what, fix);
      }
    }
    try {
      ops::Problem p = s_.representative.front().problem(s_.op, s_.dtypes.front());
      ops::check_config(*op_, p, pinned_config(*op_, p, s_.device, s_.config), s_.device);
    } catch (const UserError& e) {
      auto [what, fix] = split_message(e.what(), "see `tilepilot ops` for the knobs");
      r_.fail(c, "config: " + what, fix);
    }
  }

  /// Every case's config (the target's default with the pinned knobs) must be able to run on
  /// the device: a config that cannot compile there is a spec error, not a kernel failure.
  void validate_configs() {
    YAML::Node c = root_["config"];
    for (const ShapeEntry* s : all_shapes())
      for (DType t : s_.dtypes) {
        ops::Problem p = s->problem(s_.op, t);
        std::string why;
        try {
          why = config_problem(*op_, p, s_.device, pinned_config(*op_, p, s_.device, s_.config));
        } catch (const UserError& e) {
          why = e.what();
        }
        if (why.empty()) continue;
        auto [what, fix] = split_message(why, "pin another config");
        if (c.IsDefined() && !c.IsNull()) r_.fail(c, "config: " + what, fix);
        YAML::Mark at;
        at.line = s->line - 1;
        at.column = s->column - 1;
        r_.fail(at,
                std::string("shapes.") + (s->representative ? "representative" : "edge") + " in " +
                    dtype_name(t) + ": " + what,
                fix);
      }
  }

  SpecReader r_;
  YAML::Node root_;
  PilotSpec s_;
  const ops::Operator* op_ = nullptr;
  std::vector<YAML::Node> unweighted_; // representative entries without a weight
};

} // namespace

PilotSpec parse_spec(const std::string& text, const std::string& file) {
  return Parser(text, file).parse();
}

PilotSpec load_spec(const std::string& path) {
  std::string text;
  try {
    text = release::read_text(path);
  } catch (const UserError& e) {
    std::string why = e.what();
    if (why.rfind("error: ", 0) == 0) why = why.substr(7);
    user_error() << "cannot read the pilot spec: " << why
                 << "; pass the path of a YAML spec (examples in examples/pilots/)";
  }
  return parse_spec(text, path);
}

} // namespace tp::pilot
