// The model-level measurement: one Llama prefill or decode step run two ways - the "kernel"
// run, whose operators go through the dispatcher (pinned kernel where the release allows), and
// the "fallback" run, where every operator takes its fallback - on the same weights. The
// runs' logits must agree within tolerance. Timing interleaves the two (CUDA events on the GPU,
// wall time on the host) and reports the paired change with a 95% CI; one profiled forward of
// each gives every operator's share of time and the peak device memory.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "llama/Exec.h"
#include "llama/LlamaConfig.h"
#include "llama/Stats.h"
#include "tilepilot/dispatch.h"

namespace tp::models {

struct ModelRunOptions {
  LlamaConfig config;
  bool device = true; // the GPU; false: host tensors on the CPU interpreter
  /// Operators the kernel run takes from the dispatcher; the others run their fallback in both.
  /// The default covers every operator either model path calls.
  std::set<std::string> ops = {"gemm",    "attention", "decode_attention",
                               "rmsnorm", "rope",      "swiglu"};
  ops::DispatchOptions dispatch; // release folders etc. of the kernel run
  /// Configs pinned for the kernel run by operator (the pilot's current configs), installed
  /// over `dispatch.releases` for the current GPU (Dispatcher::pin).
  std::map<std::string, std::vector<ops::Pin>> pins;
  /// Pin each operator in `ops` that has no release to its default config for every problem
  /// of the model: exercises the kernels without a pilot release (they are then untested).
  bool pin_defaults = false;
  int runs = 10, warmup = 2;
  double atol = 0.1, rtol = 0.05;                   // agreement of the two runs' logits
  std::function<void(const std::string&)> progress; // one line per phase; may be empty
};

/// Where one of the model's problems goes in the kernel run.
struct ModelRoute {
  std::string label; // "gemm.qkv", "attention", "rmsnorm.residual"
  ops::Problem problem;
  ops::DispatchDecision decision;
};

struct ModelRunResult {
  std::string model, device; // config text; "NVIDIA H200 (sm_90a)" or "CPU interpreter"
  bool on_device = false;
  std::vector<ModelRoute> routes;
  std::vector<double> kernel_ms, fallback_ms; // per timed run
  PairedStats stats;                          // a = kernel, b = fallback
  OpTimes kernel_ops, fallback_ops;           // one profiled forward each, ms per label
  size_t weight_bytes = 0, activation_bytes = 0, cache_bytes = 0; // cache: decode's KV caches
  // Device memory over what was in use before the model was created: the peak while only the
  // kernel path had run (measured first), and the peak of the process after both paths.
  uint64_t kernel_peak_bytes = 0, process_peak_bytes = 0;
  double max_abs_err = 0, rel_l2_err = 0, atol = 0, rtol = 0;
  int64_t compared = 0, mismatched = 0;
  bool agree = false;
  std::string kernel_dispatch, fallback_dispatch; // dispatcher summaries of the profiled runs
};

ModelRunResult run_llama(const ModelRunOptions& o);

/// The operator family of a label: "gemm.qkv" -> "gemm".
std::string op_family(const std::string& label);
/// Milliseconds of one family ("gemm", "attention") in a profile.
double family_ms(const OpTimes& t, const std::string& family);

/// The operator family with the largest share of a profile's time ("" for an empty profile).
struct Bottleneck {
  std::string family;
  double ms = 0, share = 0;
};
Bottleneck bottleneck(const OpTimes& t);

nlohmann::json to_json(const ModelRunResult& r);
std::string to_text(const ModelRunResult& r);

} // namespace tp::models
