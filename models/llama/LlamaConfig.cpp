// Llama configs: presets, key=value parsing and validation.
#include "llama/LlamaConfig.h"

#include <fmt/format.h>

#include "tilepilot/error.h"

namespace tp::models {

namespace {

int64_t positive(const std::string& key, const std::string& v) {
  try {
    size_t pos = 0;
    long long x = std::stoll(v, &pos);
    if (pos == v.size() && x > 0) return x;
  } catch (const std::exception&) {}
  user_error() << "model: " << key << "=" << v << " is not a positive integer";
  return 0;
}

double positive_real(const std::string& key, const std::string& v) {
  try {
    size_t pos = 0;
    double x = std::stod(v, &pos);
    if (pos == v.size() && x > 0) return x;
  } catch (const std::exception&) {}
  user_error() << "model: " << key << "=" << v << " is not a positive number";
  return 0;
}

} // namespace

LlamaConfig LlamaConfig::tiny() {
  LlamaConfig c;
  c.layers = 2;
  c.batch = 2;
  c.seq = 16;
  c.hidden = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.ffn = 128;
  c.vocab = 256;
  c.rope_theta = 10000.0;
  return c;
}

void LlamaConfig::validate() const {
  for (auto [k, v] : {std::pair{"layers", layers},
                      {"batch", batch},
                      {"seq", seq},
                      {"hidden", hidden},
                      {"heads", heads},
                      {"kv_heads", kv_heads},
                      {"head_dim", head_dim},
                      {"ffn", ffn},
                      {"vocab", vocab}})
    if (v <= 0) user_error() << "model: " << k << " must be positive, got " << v;
  if (heads % kv_heads)
    user_error() << "model: kv_heads=" << kv_heads << " does not divide heads=" << heads
                 << "; grouped-query attention shares each kv head among heads/kv_heads heads";
  if (head_dim % 16 || head_dim > 256)
    user_error() << "model: head_dim=" << head_dim
                 << " is not supported by the attention kernel; use a multiple of 16 up to 256";
  if (hidden % 16 || ffn % 16)
    user_error() << "model: hidden=" << hidden << " and ffn=" << ffn
                 << " must be multiples of 16 (the element-wise kernels work in chunks of 16+)";
  if (dtype != DType::bf16 && dtype != DType::f16)
    user_error() << "model: dtype " << dtype_name(dtype) << " is not supported; use bf16 or f16";
  if (tokens() * std::max(qkv_dim(), 2 * ffn) >= (int64_t{1} << 31))
    user_error() << "model: batch x seq = " << tokens() << " tokens make activations of over 2^31 "
                 << "elements, beyond the kernels' 32-bit indexing; use fewer tokens";
}

std::string LlamaConfig::str() const {
  return fmt::format("llama-prefill {} layers, batch {} x seq {}, hidden {}, heads {}/{}x{}, "
                     "ffn {}, vocab {}, {} logits, {}",
                     layers, batch, seq, hidden, heads, kv_heads, head_dim, ffn, vocab,
                     all_logits ? "all" : "last-token", dtype_name(dtype));
}

LlamaConfig parse_llama_config(const std::map<std::string, std::string>& kv, LlamaConfig base) {
  LlamaConfig c = base;
  if (auto it = kv.find("preset"); it != kv.end()) {
    if (it->second == "llama3-8b")
      c = LlamaConfig::llama3_8b();
    else if (it->second == "tiny")
      c = LlamaConfig::tiny();
    else
      user_error() << "model: preset=" << it->second << " is unknown; use llama3-8b or tiny";
  }
  bool head_dim_given = kv.count("head_dim") > 0;
  for (const auto& [k, v] : kv) {
    if (k == "preset") continue;
    if (k == "layers")
      c.layers = positive(k, v);
    else if (k == "batch")
      c.batch = positive(k, v);
    else if (k == "seq")
      c.seq = positive(k, v);
    else if (k == "tokens")
      continue; // after batch is known
    else if (k == "hidden")
      c.hidden = positive(k, v);
    else if (k == "heads")
      c.heads = positive(k, v);
    else if (k == "kv_heads")
      c.kv_heads = positive(k, v);
    else if (k == "head_dim")
      c.head_dim = positive(k, v);
    else if (k == "ffn" || k == "mlp")
      c.ffn = positive(k, v);
    else if (k == "vocab")
      c.vocab = positive(k, v);
    else if (k == "eps")
      c.rms_eps = positive_real(k, v);
    else if (k == "rope_theta")
      c.rope_theta = positive_real(k, v);
    else if (k == "seed")
      c.seed = static_cast<uint64_t>(positive(k, v));
    else if (k == "logits") {
      if (v != "last" && v != "all")
        user_error() << "model: logits=" << v << " is unknown; use last or all";
      c.all_logits = v == "all";
    } else if (k == "dtype") {
      auto t = parse_dtype(v);
      if (!t) user_error() << "model: dtype=" << v << " is unknown; use bf16 or f16";
      c.dtype = *t;
    } else {
      user_error() << "model: unknown setting '" << k << "'; known: preset, layers, batch, seq, "
                   << "tokens, hidden, heads, kv_heads, head_dim, ffn (mlp), vocab, eps, "
                   << "rope_theta, logits, seed, dtype";
    }
  }
  if (auto it = kv.find("tokens"); it != kv.end()) {
    int64_t t = positive("tokens", it->second);
    if (t % c.batch)
      user_error() << "model: tokens=" << t << " is not a multiple of batch=" << c.batch;
    if (kv.count("seq") && c.seq * c.batch != t)
      user_error() << "model: tokens=" << t << " but batch x seq = " << c.batch * c.seq
                   << "; give tokens or seq, not both";
    c.seq = t / c.batch;
  }
  if (!head_dim_given && (kv.count("hidden") || kv.count("heads"))) {
    if (c.hidden % c.heads)
      user_error() << "model: heads=" << c.heads << " does not divide hidden=" << c.hidden
                   << "; give head_dim explicitly";
    c.head_dim = c.hidden / c.heads;
  }
  c.validate();
  return c;
}

} // namespace tp::models
