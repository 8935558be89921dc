// `tilepilot model [--path llama-prefill|llama-decode] [--preset llama3-8b|tiny] [--layers N]
//  [--batch N] [--seq N] [--kv-len N[:N...]] [--paged-kv N] [--set k=v,...] [--backend cuda|cpu]
//  [--release DIR]... [--ops OP,OP] [--pin-defaults] [--disable LIB,...] [--runs N]
//  [--warmup N] [--atol X] [--rtol X] [--json]`
//
// A Llama model path (models/llama: a prefill, or one decode step over a KV cache) run with
// the dispatcher (pinned kernels where a release allows) and with every dispatched operator on
// its fallback; prints where each problem went, the interleaved latency with its 95% CI, each
// operator's share of time and the bottleneck family, memory, and whether the two runs' logits
// agree. Exit status: 0 agree, 1 disagree, 2 bad input.
#include <cmath>
#include <iostream>
#include <sstream>

#include "Commands.h"
#include "llama/ModelRun.h"
#include "ops/Operator.h"

namespace tp::cli {

namespace {

std::set<std::string> split_set(const std::string& text) {
  std::set<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.insert(item);
  return out;
}

} // namespace

void add_model_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand(
      "model", "run a Llama prefill or decode step with the pinned kernels and with the "
               "fallbacks, and compare");
  struct Args {
    std::string path = "llama-prefill", preset = "llama3-8b", kv_len, paged_kv, set,
                backend = "cuda", ops, disable;
    int64_t layers = 0, batch = 0, seq = 0;
    std::vector<std::string> releases;
    bool pin_defaults = false, json = false;
    int runs = 10, warmup = 2;
    double atol = 0.1, rtol = 0.05;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--path", a->path,
                  "llama-prefill (default) | llama-decode (one new token per sequence)");
  cmd->add_option("--preset", a->preset, "llama3-8b (default) | tiny");
  cmd->add_option("--layers", a->layers, "decoder layers (default 2)");
  cmd->add_option("--batch", a->batch, "sequences (default 1)");
  cmd->add_option("--seq", a->seq, "prefill: tokens per sequence (default 2048)");
  cmd->add_option("--kv-len", a->kv_len,
                  "decode: cached tokens per sequence (default 4096), or one per sequence "
                  "separated by ':'");
  cmd->add_option("--paged-kv", a->paged_kv,
                  "decode: a paged KV cache with pages of N tokens (16, 32, 64, 128 or 256; "
                  "default 0: contiguous)");
  cmd->add_option("--set", a->set,
                  "more model settings, e.g. hidden=2048,heads=16,kv_heads=4,ffn=8192,logits=all "
                  "(prefill), paged_kv=16 (decode)");
  cmd->add_option("--backend", a->backend, "cuda (default) | cpu (interpreter; tiny models)");
  cmd->add_option("--release", a->releases, "a pilot release/ folder (repeat per operator)");
  cmd->add_option("--ops", a->ops,
                  "operators the kernel run dispatches (default: every operator the model calls)");
  cmd->add_flag("--pin-defaults", a->pin_defaults,
                "pin operators without a release to their default config (untested kernels)");
  cmd->add_option("--disable", a->disable, "libraries to treat as missing: NVRTC,cuBLASLt,cuDNN");
  cmd->add_option("--runs", a->runs, "timed runs of each variant (default 10)");
  cmd->add_option("--warmup", a->warmup, "untimed runs of each variant first (default 2)");
  cmd->add_option("--atol", a->atol, "agreement of the logits: absolute tolerance (0.1)");
  cmd->add_option("--rtol", a->rtol, "agreement of the logits: relative tolerance (0.05)");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->callback([a, cmd, rc] {
    // Given means used: --layers 0 is an error, never "the default".
    for (const char* flag : {"--layers", "--batch", "--seq"})
      if (cmd->count(flag)) {
        int64_t v = std::string(flag) == "--layers"  ? a->layers
                    : std::string(flag) == "--batch" ? a->batch
                                                     : a->seq;
        if (v < 1) user_error() << "model: " << flag << " " << v << " must be at least 1";
      }
    for (auto [flag, v] : {std::pair{"--atol", a->atol}, std::pair{"--rtol", a->rtol}})
      if (!std::isfinite(v) || v < 0)
        user_error() << "model: " << flag << " " << v << " must be a finite number >= 0";
    std::map<std::string, std::string> kv = ops::parse_kv(a->set, "--set");
    if (cmd->count("--preset") || !kv.count("preset")) kv["preset"] = a->preset;
    // The path sets the mode; --set mode= alone may too (the spec's model config takes it).
    const std::string mode = models::mode_of_path(a->path);
    if (kv.count("mode") && cmd->count("--path") && kv["mode"] != mode)
      user_error() << "model: --set mode=" << kv["mode"] << " contradicts --path " << a->path
                   << "; give one of them";
    if (!kv.count("mode")) kv["mode"] = mode;
    if (cmd->count("--kv-len")) kv["kv_len"] = a->kv_len;
    if (cmd->count("--paged-kv")) kv["paged_kv"] = a->paged_kv;
    if (cmd->count("--layers")) kv["layers"] = std::to_string(a->layers);
    if (cmd->count("--batch")) kv["batch"] = std::to_string(a->batch);
    if (cmd->count("--seq")) kv["seq"] = std::to_string(a->seq);
    if (a->backend != "cuda" && a->backend != "cpu")
      user_error() << "--backend " << a->backend << " is unknown; use cuda or cpu";
    if (a->runs < 1 || a->warmup < 0)
      user_error() << "--runs must be at least 1 and --warmup at least 0";
    models::ModelRunOptions o;
    o.config = models::parse_llama_config(kv);
    o.device = a->backend == "cuda";
    // The interpreter runs some 1e8 operations a second: bound the weights, the GEMMs' work
    // and the decode caches' size.
    const models::LlamaConfig& c = o.config;
    const double weights = static_cast<double>(c.layers) *
                               (c.hidden * (c.qkv_dim() + c.q_dim()) + 3.0 * c.hidden * c.ffn) +
                           2.0 * c.vocab * c.hidden;
    const double cache = c.decode() ? 2.0 * c.layers * c.batch * c.cache_capacity() * c.q_dim() : 0;
    if (!o.device && (weights > 1e8 || 2 * weights * c.tokens() > 1e10 || cache > 1e9))
      user_error() << "model: " << o.config.str() << " is far too large for the CPU interpreter; "
                   << "use --preset tiny (or --backend cuda)";
    o.ops = split_set(a->ops);
    o.dispatch.releases = a->releases;
    o.dispatch.disable_libraries = split_set(a->disable);
    o.pin_defaults = a->pin_defaults;
    o.runs = a->runs;
    o.warmup = a->warmup;
    o.atol = a->atol;
    o.rtol = a->rtol;
    if (!a->json) o.progress = [](const std::string& s) { std::cerr << "model: " << s << "\n"; };
    models::ModelRunResult r = models::run_llama(o);
    if (a->json)
      std::cout << models::to_json(r).dump() << "\n";
    else
      std::cout << models::to_text(r);
    *rc = r.agree ? 0 : 1;
  });
}

} // namespace tp::cli
