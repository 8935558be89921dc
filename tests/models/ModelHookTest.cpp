// The pilot's model hook without a GPU: which config each model problem borrows, what the hook
// says when it cannot run here, and the user errors it raises for a bad model spec.
#include <fstream>
#include <gtest/gtest.h>

#include "llama/Llama.h"
#include "pilot/ModelBackend.h"
#include "pilot/Spec.h"

using namespace tp;
using namespace tp::pilot;

namespace {

ops::Problem gemm(const std::string& shape) {
  return ops::find_operator("gemm").parse(ops::parse_kv(shape, "shape"), DType::bf16);
}

ops::Config cfg(int64_t bn) {
  return {{"bm", 128}, {"bn", bn}, {"bk", 64}, {"stages", 4}, {"threads", 256}};
}

} // namespace

TEST(ModelHook, ExactShapesKeepTheirConfigOthersBorrowTheNearest) {
  models::LlamaConfig c = models::parse_llama_config({{"tokens", "4096"}});
  std::vector<std::pair<std::string, ops::Problem>> mine;
  for (const auto& lp : models::llama_problems(c))
    if (lp.second.op == "gemm") mine.push_back(lp);
  std::vector<std::pair<ops::Problem, ops::Config>> piloted = {
      {gemm("M=4096,N=6144,K=4096,layout=nt"), cfg(64)},
      {gemm("M=4096,N=4096,K=4096,layout=nt"), cfg(128)},
      {gemm("M=4096,N=28672,K=4096,layout=nt"), cfg(192)},
      {gemm("M=4096,N=4096,K=14336,layout=nt"), cfg(256)},
      {gemm("M=77,N=45,K=133,layout=nn"), cfg(16)}, // another layout: never borrowed
      {gemm("M=1,N=4096,K=4096,layout=nt"), cfg(32)}};
  std::vector<std::string> notes;
  auto pins = model_pins(mine, piloted, {}, &notes);
  ASSERT_EQ(pins.size(), 5u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(pins[i].second, piloted[i].second) << i;
  // The LM head (one row: a decode GEMM, another kernel) borrows the decode shape's config,
  // though N=28672's prefill shape is nearer in size.
  EXPECT_EQ(pins[4].first.at("N"), 128256);
  EXPECT_EQ(pins[4].second, cfg(32));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("gemm.lm_head"), std::string::npos) << notes[0];

  // Without a piloted decode shape it runs the fallback in both runs.
  piloted.pop_back();
  notes.clear();
  pins = model_pins(mine, piloted, {}, &notes);
  ASSERT_EQ(pins.size(), 4u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("gemm.lm_head"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("no piloted problem of its kind"), std::string::npos) << notes[0];
}

TEST(ModelHook, AProblemNearestAFrameworkRoutedShapeRunsTheFallback) {
  std::vector<std::pair<std::string, ops::Problem>> mine = {
      {"gemm.decode", gemm("M=2,N=4096,K=4096,layout=nt")},
      {"gemm.prefill", gemm("M=3000,N=4096,K=4096,layout=nt")}};
  std::vector<std::string> notes;
  auto pins = model_pins(mine, {{gemm("M=1,N=4096,K=4096,layout=nt"), cfg(64)}},
                         {gemm("M=4096,N=4096,K=4096,layout=nt")}, &notes);
  ASSERT_EQ(pins.size(), 1u);
  EXPECT_EQ(pins[0].first.at("M"), 2);
  EXPECT_EQ(pins[0].second, cfg(64));
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[1].find("gemm.prefill"), std::string::npos) << notes[1];
  EXPECT_NE(notes[1].find("measured the framework faster at K=4096,M=4096"), std::string::npos)
      << notes[1];
}

TEST(ModelHook, AProblemWithoutAPilotedKindIsLeftOnTheFallback) {
  std::vector<std::pair<std::string, ops::Problem>> mine = {
      {"gemm.qkv", gemm("M=64,N=64,K=64,layout=nt")}};
  std::vector<std::string> notes;
  auto pins = model_pins(mine, {{gemm("M=64,N=64,K=64,layout=nn"), cfg(64)}}, {}, &notes);
  EXPECT_TRUE(pins.empty());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("fallback"), std::string::npos);
}

TEST(ModelHook, IsRegisteredAndRejectsUnknownModelsAndSettings) {
  Backends b;
  add_model_hook(b);
  ASSERT_TRUE(bool(b.model_run));
  const ops::Operator& op = ops::find_operator("gemm");
  ModelSpec spec{"gpt-prefill", {}};
  EXPECT_THROW(b.model_run(spec, op, {}, {}), UserError);
  spec = {"llama-prefill", {{"layer", "2"}}};
  EXPECT_THROW(b.model_run(spec, op, {}, {}), UserError);
}

TEST(ModelHook, WithoutAGpuTheStageIsSkippedWithTheReason) {
  std::string why;
  if (rt::device_count(&why) > 0) GTEST_SKIP() << "this machine has a GPU";
  Backends b;
  add_model_hook(b);
  ModelSpec spec{"llama-prefill", {{"layers", "2"}, {"tokens", "4096"}}};
  try {
    b.model_run(spec, ops::find_operator("attention"), {}, {});
    FAIL() << "expected StageSkipped";
  } catch (const StageSkipped& e) {
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
}

TEST(ModelHook, TheRmsNormPilotSpecRunsItsModelStageOnTheDecodePath) {
  PilotSpec s =
      load_spec(std::string(TILEPILOT_TESTS_DIR) + "/../examples/pilots/rmsnorm-h200.yaml");
  ASSERT_TRUE(s.has_model);
  EXPECT_EQ(s.model.path, "llama-decode");
  EXPECT_TRUE(s.wants("model"));
  // The spec's model problems of the piloted operator: the decode step's norms at batch 32.
  std::map<std::string, std::string> kv = s.model.config;
  kv["mode"] = "decode";
  std::vector<std::string> rmsnorm_shapes;
  for (const auto& [label, p] : models::llama_problems(models::parse_llama_config(kv)))
    if (p.op == "rmsnorm") rmsnorm_shapes.push_back(p.shape_str());
  EXPECT_EQ(rmsnorm_shapes,
            (std::vector<std::string>{"H=4096,T=32,residual=0", "H=4096,T=32,residual=1"}));
  std::string why;
  if (rt::device_count(&why) > 0) return; // the stage itself runs in the GPU suite
  Backends b;
  add_model_hook(b);
  try {
    b.model_run(s.model, ops::find_operator("rmsnorm"), {}, {});
    FAIL() << "expected StageSkipped";
  } catch (const StageSkipped& e) {
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
}

TEST(ModelHook, ABadDecodeModelSectionFailsTheSpecWithTheSetting) {
  // The rmsnorm example spec with its model section replaced.
  std::ifstream in(std::string(TILEPILOT_TESTS_DIR) + "/../examples/pilots/rmsnorm-h200.yaml");
  const std::string example((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string section =
      "model:\n  path: llama-decode\n  config: {layers: 2, batch: 32, kv_len: 4096}\n";
  ASSERT_NE(example.find(section), std::string::npos) << "the example's model section changed";
  auto spec_error = [&](const std::string& model) {
    std::string text = example;
    text.replace(text.find(section), section.size(), "model: " + model + "\n");
    try {
      parse_spec(text, "decode.yaml");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(spec_error("{path: llama-decode, config: {batch: 8, kv_len: 4096}}"), "no error");
  EXPECT_EQ(spec_error("{path: llama-decode, config: {batch: 8, kv_len: 4096, paged_kv: 16}}"),
            "no error");
  EXPECT_NE(spec_error("{path: llama-decode, config: {paged_kv: 24}}")
                .find("paged_kv=24 is not a page size decode_attention takes"),
            std::string::npos);
  EXPECT_NE(spec_error("{path: llama-decode, config: {kv_len: 0}}").find("kv_len=0"),
            std::string::npos);
  EXPECT_NE(spec_error("{path: llama-decode, config: {batch: 0}}").find("batch=0"),
            std::string::npos);
  EXPECT_NE(spec_error("{path: llama-decode, config: {mode: prefill}}").find("contradicts"),
            std::string::npos);
  EXPECT_NE(spec_error("{path: llama-decode, config: {seq: 128}}").find("prefill setting"),
            std::string::npos);
  EXPECT_NE(spec_error("{path: llama-beam}").find("llama-prefill and llama-decode"),
            std::string::npos);
}
