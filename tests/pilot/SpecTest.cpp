// Pilot spec parsing: a valid spec round-trips with weights normalized, and each kind of
// malformed spec fails with "FILE:LINE:COL: error: <what>; <fix>" pointing at the culprit.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "pilot/Spec.h"

using namespace tp;
using namespace tp::pilot;

namespace {

const std::string kGood = R"(operator: gemm
device: sm_90a
dtypes: [bf16]
shapes:
  representative:
    - {M: 64, N: 64, K: 64, weight: 3}
    - {M: 128, N: 64, K: 32, weight: 1}
  edge:
    - {M: 1, N: 45, K: 133, layout: nt}
reference: framework
tolerance: {atol: 2e-2, rtol: 2e-2}
objective: {metric: weighted_latency, min_speedup: 1.1}
memory_limit_mb: 512
metrics: [correctness, compile, warm, memory]
fallback: required
)";

/// kGood with the line starting `prefix` replaced by `line` ("" deletes it).
std::string with(const std::string& prefix, const std::string& line) {
  std::string out, l;
  std::istringstream in(kGood);
  bool found = false;
  while (std::getline(in, l)) {
    if (!found && l.rfind(prefix, 0) == 0) {
      found = true;
      if (!line.empty()) out += line + "\n";
    } else {
      out += l + "\n";
    }
  }
  EXPECT_TRUE(found) << prefix;
  return out;
}

/// The error message, or "" when the spec parses.
std::string error_of(const std::string& text) {
  try {
    parse_spec(text, "t.yaml");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

/// The property every spec error has: located, and says what and how to fix.
void expect_error(const std::string& text, int line, int col, const std::string& what,
                  const std::string& fix) {
  std::string msg = error_of(text);
  std::string where = "t.yaml:" + std::to_string(line) + ":" + std::to_string(col) + ": error: ";
  EXPECT_EQ(msg.rfind(where, 0), 0u) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
  EXPECT_NE(msg.find("; "), std::string::npos) << "no fix in: " << msg;
  EXPECT_NE(msg.find(fix), std::string::npos) << msg;
}

} // namespace

TEST(PilotSpec, ValidSpecParsesAndNormalizesWeights) {
  PilotSpec s = parse_spec(kGood, "t.yaml");
  EXPECT_EQ(s.op, "gemm");
  ASSERT_EQ(s.representative.size(), 2u);
  EXPECT_DOUBLE_EQ(s.representative[0].weight, 0.75);
  EXPECT_DOUBLE_EQ(s.representative[1].weight, 0.25);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("normalized"), std::string::npos);
  EXPECT_EQ(s.edge[0].kv.at("layout"), "nt");
  EXPECT_EQ(s.edge[0].line, 9);
  nlohmann::json j = to_json(s);
  EXPECT_EQ(j["shapes"]["representative"][0]["weight"], 0.75);
}

TEST(PilotSpec, AttentionLensListAndBooleanFlags) {
  std::string text = R"(operator: attention
device: sm_90a
dtypes: [bf16, f16]
shapes:
  representative: [{B: 1, H: 2, S: 64, D: 64, causal: true}]
  edge: [{B: 3, H: 2, S: 16, D: 64, lens: [5, 16, 0]}]
reference: framework
tolerance: {atol: 2e-2, rtol: 2e-2}
objective: {metric: weighted_latency, min_speedup: 1.0}
memory_limit_mb: 100
metrics: [correctness, warm, memory]
fallback: optional
)";
  PilotSpec s = parse_spec(text, "a.yaml");
  EXPECT_EQ(s.representative[0].kv.at("causal"), "1");
  EXPECT_EQ(s.edge[0].kv.at("lens"), "5:16:0");
  EXPECT_DOUBLE_EQ(s.representative[0].weight, 1.0);
  EXPECT_EQ(s.dtypes.size(), 2u);
}

TEST(PilotSpec, YamlSyntaxError) {
  expect_error(with("dtypes", "dtypes: [bf16"), 4, 7, "YAML syntax", "indentation");
}

TEST(PilotSpec, NotAMap) {
  expect_error("- just\n- a list\n", 1, 1, "the spec must be a map", "examples/pilots");
}

TEST(PilotSpec, UnknownKeySuggestsClosest) {
  expect_error(with("dtypes", "dtype: [bf16]"), 3, 1, "unknown key 'dtype' in the spec",
               "did you mean 'dtypes'?");
}

TEST(PilotSpec, DuplicateKey) {
  expect_error(with("fallback", "fallback: required\nfallback: optional"), 16, 1,
               "key 'fallback' is given twice", "keep one");
}

TEST(PilotSpec, MissingRequiredField) {
  expect_error(with("fallback", ""), 1, 1, "missing the required field 'fallback'",
               "add e.g. fallback: required");
}

TEST(PilotSpec, WrongType) {
  expect_error(with("memory_limit_mb", "memory_limit_mb: lots"), 13, 18,
               "memory_limit_mb must be a number, got 'lots'", "write e.g. memory_limit_mb: 512");
  expect_error(with("dtypes", "dtypes: bf16"), 3, 9, "dtypes must be a list, got a scalar",
               "dtypes: [bf16]");
}

TEST(PilotSpec, UnknownOperator) {
  expect_error(with("operator", "operator: gemn"), 1, 11, "unknown operator 'gemn'",
               "did you mean 'gemm'?");
}

TEST(PilotSpec, BadDevice) {
  expect_error(with("device", "device: h200"), 2, 9, "device 'h200' is not a GPU architecture",
               "device: sm_90a");
}

TEST(PilotSpec, UnknownDtype) {
  expect_error(with("dtypes", "dtypes: [bf16, b16]"), 3, 16, "unknown dtype 'b16'",
               "did you mean 'bf16'?");
}

TEST(PilotSpec, DtypeTheOperatorRejects) {
  std::string text = with("operator", "operator: attention");
  text = std::regex_replace(text, std::regex(R"(\{M: 64, N: 64, K: 64, weight: 3\})"),
                            "{B: 1, H: 2, S: 64, D: 64, weight: 3}");
  text = std::regex_replace(text, std::regex(R"(\{M: 128, N: 64, K: 32, weight: 1\})"),
                            "{B: 1, H: 2, S: 32, D: 64, weight: 1}");
  text = std::regex_replace(text, std::regex(R"(\{M: 1, N: 45, K: 133, layout: nt\})"),
                            "{B: 1, H: 1, S: 1, D: 64}");
  text = std::regex_replace(text, std::regex(R"(dtypes: \[bf16\])"), "dtypes: [bf16, f32]");
  expect_error(text, 3, 16, "attention: dtype f32 is not supported", "use bf16 or f16");
}

TEST(PilotSpec, UnknownShapeKey) {
  expect_error(with("    - {M: 64", "    - {M: 64, N: 64, k: 64, weight: 3}"), 6, 22,
               "unknown key 'k' in shapes.representative[0]", "did you mean 'K'?");
}

TEST(PilotSpec, ShapeTheOperatorRejects) {
  expect_error(with("    - {M: 1,", "    - {M: 1, N: 45, K: 133, layout: xy}"), 9, 7,
               "shapes.edge: gemm: layout=xy is not supported", "use nn, nt or tn");
  expect_error(with("    - {M: 64", "    - {M: 64, N: 64, weight: 3}"), 6, 7, "missing K",
               "write e.g. M=4096,N=4096,K=4096");
}

TEST(PilotSpec, NonPositiveWeight) {
  expect_error(with("    - {M: 64", "    - {M: 64, N: 64, K: 64, weight: 0}"), 6, 37,
               "shapes.representative[0].weight must be positive, got 0", "e.g. 0.25");
}

TEST(PilotSpec, WeightOnEdgeShapeOrMissingOnSome) {
  expect_error(with("    - {M: 1,", "    - {M: 1, N: 45, K: 133, weight: 1}"), 9, 29,
               "edge shapes carry no weight", "move the shape to shapes.representative");
  expect_error(with("    - {M: 128", "    - {M: 128, N: 64, K: 32}"), 7, 7,
               "has no weight but others do", "give every representative shape a weight");
}

TEST(PilotSpec, DuplicateShape) {
  expect_error(with("    - {M: 1,", "    - {M: 64, N: 64, K: 64}"), 9, 7,
               "shapes.edge[0] repeats the shape at line 6", "remove one");
}

TEST(PilotSpec, NonPositiveMinSpeedup) {
  expect_error(with("objective", "objective: {metric: weighted_latency, min_speedup: 0}"), 12, 52,
               "objective.min_speedup must be positive, got 0", "e.g. 1.1");
}

TEST(PilotSpec, RouteIsAllUnlessPerShapeIsAsked) {
  EXPECT_EQ(parse_spec(kGood, "t.yaml").route, "all");
  PilotSpec s =
      parse_spec(with("objective",
                      "objective: {metric: weighted_latency, min_speedup: 1.1, route: per_shape}"),
                 "t.yaml");
  EXPECT_EQ(s.route, "per_shape");
  EXPECT_EQ(to_json(s)["objective"]["route"], "per_shape");
  expect_error(
      with("objective", "objective: {metric: weighted_latency, min_speedup: 1.1, route: best}"), 12,
      64, "objective.route 'best' is not a routing", "route: per_shape");
}

TEST(PilotSpec, NegativeTolerance) {
  expect_error(with("tolerance", "tolerance: {atol: -1e-2, rtol: 2e-2}"), 11, 19,
               "tolerance.atol is negative", "2e-2 for bf16");
}

TEST(PilotSpec, UnknownMetricAndMissingNeededMetric) {
  expect_error(with("metrics", "metrics: [correctness, warmup, memory]"), 14, 24,
               "unknown metric 'warmup'", "did you mean 'warm'?");
  expect_error(with("metrics", "metrics: [correctness, memory]"), 14, 10, "metrics lacks 'warm'",
               "warm latency for the objective");
  expect_error(with("metrics", "metrics: [correctness, warm, memory, model]"), 14, 10,
               "metrics lists 'model' but the spec has no model section", "model: {path:");
}

TEST(PilotSpec, BadFallbackPolicyAndReference) {
  expect_error(with("fallback", "fallback: maybe"), 15, 11, "fallback 'maybe' is not a policy",
               "fallback: required");
  expect_error(with("reference", "reference: torch"), 10, 12, "reference 'torch' is not supported",
               "reference: framework");
}

TEST(PilotSpec, BadPinnedConfigAndFault) {
  expect_error(kGood + "config: {bm: 100}\n", 16, 9, "config: gemm: config bm=100 is out of range",
               "a multiple of 16");
  expect_error(kGood + "inject_fault: wrong_sign\n", 16, 15, "unknown inject_fault 'wrong_sign'",
               "wrong_scale");
  PilotSpec s = parse_spec(kGood + "config: {stages: 3}\ninject_fault: wrong_scale\n", "t.yaml");
  EXPECT_EQ(s.config.at("stages"), 3);
  EXPECT_EQ(s.inject_fault, "wrong_scale");
}

TEST(PilotSpec, EmptyRepresentative) {
  expect_error(R"(operator: gemm
device: sm_90a
dtypes: [bf16]
shapes: {representative: []}
)",
               4, 26, "shapes.representative is empty", "at least one shape");
}

TEST(PilotSpec, MissingFile) {
  try {
    load_spec("/nonexistent/spec.yaml");
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read the pilot spec"), std::string::npos);
  }
}
