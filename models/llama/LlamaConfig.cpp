// Llama configs: presets, key=value parsing and validation.
#include "llama/LlamaConfig.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <sstream>

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

/// paged_kv=16; which page sizes fit is validate()'s rule, the text only has to be a number.
int64_t page_size(const std::string& v) {
  try {
    size_t pos = 0;
    long long x = std::stoll(v, &pos);
    if (pos == v.size() && x >= 0) return x;
  } catch (const std::exception&) {}
  user_error() << "model: paged_kv=" << v << " is not a page size; use 16, 32, 64, 128 or 256 "
               << "(tokens per page), or 0 for a contiguous cache";
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

/// kv_len=4096 (every sequence) or kv_len=100:4096:7 (one per sequence).
std::vector<int64_t> kv_lengths(const std::string& v) {
  std::vector<int64_t> out;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ':');)
    out.push_back(positive("kv_len", item));
  if (out.empty()) positive("kv_len", v);
  return out;
}

/// Llama-3.1's context length: a cache position beyond it is no Llama decode step.
constexpr int64_t kMaxPositions = 131072;
/// decode_attention's page sizes (its `block` key).
constexpr int64_t kPageSizes[] = {16, 32, 64, 128, 256};
/// The rmsnorm operator's epsilon (Llama-3's rms_norm_eps).
constexpr double kOperatorEps = 1e-5;

/// paged_kv is one of decode_attention's page sizes and no larger than the cache it pages.
void validate_page_size(const LlamaConfig& c) {
  const int64_t cap = c.cache_capacity();
  if (std::find(std::begin(kPageSizes), std::end(kPageSizes), c.paged_kv) == std::end(kPageSizes))
    user_error() << "model: paged_kv=" << c.paged_kv << " is not a page size decode_attention "
                 << "takes; use 16, 32, 64, 128 or 256 (powers of two), or 0 for a contiguous "
                 << "cache";
  if (c.paged_kv > cap) {
    std::string fit;
    for (int64_t p : kPageSizes)
      if (p <= cap) fit += (fit.empty() ? "" : ", ") + std::to_string(p);
    user_error() << "model: paged_kv=" << c.paged_kv << " is larger than the whole cache of " << cap
                 << " entries (the longest kv_len + 1); use "
                 << (fit.empty() ? "paged_kv=0 (contiguous), or a kv_len of at least 15 (the "
                                   "smallest page holds 16 tokens)"
                                 : "a page size up to " + std::to_string(cap) + " (" + fit +
                                       "), or paged_kv=0 (contiguous)");
  }
  // The pool rounds each sequence up to whole pages: it can pass 2^31 where the cache did not.
  const int64_t pool = c.cache_pages() * c.kv_heads * c.paged_kv * c.head_dim;
  if (pool >= (int64_t{1} << 31))
    user_error() << "model: a paged KV pool of " << c.cache_pages() << " pages x " << c.kv_heads
                 << " kv heads x " << c.paged_kv << " tokens x " << c.head_dim
                 << " has over 2^31 elements, beyond the kernels' 32-bit indexing; use fewer "
                 << "sequences, shorter caches or a smaller page size";
}

} // namespace

LlamaConfig LlamaConfig::tiny_decode() {
  LlamaConfig c;
  c.mode = LlamaMode::decode;
  c.layers = 2;
  c.batch = 3;
  c.kv_lens = {5, 40, 17};
  c.kv_len = 40;
  c.hidden = 128;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.ffn = 192;
  c.vocab = 256;
  c.rope_theta = 10000.0;
  return c;
}

int64_t LlamaConfig::kv_len_of(int64_t b) const {
  return kv_lens.empty() ? kv_len : kv_lens.at(static_cast<size_t>(b));
}

int64_t LlamaConfig::cache_capacity() const {
  int64_t longest = kv_len;
  for (int64_t l : kv_lens)
    longest = std::max(longest, l);
  return longest + 1;
}

int64_t LlamaConfig::pages_per_seq() const {
  return paged() ? (cache_capacity() + paged_kv - 1) / paged_kv : 0;
}

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
  if (decode() && head_dim != 64 && head_dim != 128)
    user_error() << "model: head_dim=" << head_dim
                 << " is not supported by decode_attention; use 64 or 128";
  if (!decode() && (head_dim % 16 || head_dim > 256))
    user_error() << "model: head_dim=" << head_dim
                 << " is not supported by the attention kernel; use a multiple of 16 up to 256";
  if (std::fabs(rms_eps - kOperatorEps) > 1e-12)
    user_error() << "model: eps=" << rms_eps << " differs from the rmsnorm operator's 1e-5 "
                 << "(Llama-3's rms_norm_eps), which every norm of the model runs; use eps=1e-5";
  if (rope_theta != std::floor(rope_theta) || rope_theta > 2147483647.0)
    user_error() << "model: rope_theta=" << rope_theta << " must be a whole number below 2^31 "
                 << "(the rope operator's base key)";
  if (hidden % 16 || ffn % 16)
    user_error() << "model: hidden=" << hidden << " and ffn=" << ffn
                 << " must be multiples of 16 (as every Llama's are; the model paths are "
                    "tested only at such sizes)";
  if (dtype != DType::bf16 && dtype != DType::f16)
    user_error() << "model: dtype " << dtype_name(dtype) << " is not supported; use bf16 or f16";
  if (paged_kv < 0)
    user_error() << "model: paged_kv=" << paged_kv << " must be a page size in tokens "
                 << "(16, 32, 64, 128 or 256), or 0 for a contiguous cache";
  if (!decode() && paged_kv != 0)
    user_error() << "model: paged_kv=" << paged_kv << " is a decode setting (the KV cache's "
                 << "page size); a prefill has no cache: use mode=decode or drop paged_kv";
  if (decode()) {
    if (kv_len <= 0) user_error() << "model: kv_len must be positive, got " << kv_len;
    if (!kv_lens.empty() && static_cast<int64_t>(kv_lens.size()) != batch)
      user_error() << "model: kv_len lists " << kv_lens.size() << " lengths for batch=" << batch
                   << "; give one length for every sequence, or a single length for all";
    for (int64_t b = 0; b < batch; ++b)
      if (kv_len_of(b) <= 0 || kv_len_of(b) >= kMaxPositions)
        user_error() << "model: kv_len=" << kv_len_of(b) << " (sequence " << b << ") is out of "
                     << "range: the new token's position must lie below Llama-3.1's context of "
                     << kMaxPositions << "; use 1 .. " << kMaxPositions - 1;
    if (batch * kv_heads * cache_capacity() * head_dim >= (int64_t{1} << 31))
      user_error() << "model: a KV cache of batch " << batch << " x " << kv_heads << " kv heads x "
                   << cache_capacity() << " entries x " << head_dim
                   << " has over 2^31 elements, beyond the kernels' 32-bit indexing; use fewer "
                   << "sequences or shorter caches (kv_len at most "
                   << ((int64_t{1} << 31) - 1) / (batch * kv_heads * head_dim) - 1
                   << " at this batch)";
    if (paged()) validate_page_size(*this);
  }
  if (tokens() * std::max(qkv_dim(), 2 * ffn) >= (int64_t{1} << 31))
    user_error() << "model: batch x seq = " << tokens() << " tokens make activations of over 2^31 "
                 << "elements, beyond the kernels' 32-bit indexing; use fewer tokens";
}

std::string LlamaConfig::str() const {
  if (decode()) {
    std::string lens = std::to_string(kv_len);
    if (!kv_lens.empty()) {
      lens.clear();
      for (int64_t l : kv_lens)
        lens += (lens.empty() ? "" : ":") + std::to_string(l);
    }
    const std::string cache =
        paged() ? fmt::format("paged KV, {}-token pages", paged_kv) : "contiguous KV";
    return fmt::format("llama-decode {} layers, batch {}, kv_len {}, hidden {}, heads {}/{}x{}, "
                       "ffn {}, vocab {}, {}, {}",
                       layers, batch, lens, hidden, heads, kv_heads, head_dim, ffn, vocab,
                       dtype_name(dtype), cache);
  }
  return fmt::format("llama-prefill {} layers, batch {} x seq {}, hidden {}, heads {}/{}x{}, "
                     "ffn {}, vocab {}, {} logits, {}",
                     layers, batch, seq, hidden, heads, kv_heads, head_dim, ffn, vocab,
                     all_logits ? "all" : "last-token", dtype_name(dtype));
}

LlamaConfig parse_llama_config(const std::map<std::string, std::string>& kv, LlamaConfig base) {
  LlamaConfig c = base;
  LlamaMode mode = base.mode;
  if (auto it = kv.find("mode"); it != kv.end()) {
    if (it->second != "prefill" && it->second != "decode")
      user_error() << "model: mode=" << it->second << " is unknown; use prefill or decode";
    mode = it->second == "decode" ? LlamaMode::decode : LlamaMode::prefill;
  }
  if (auto it = kv.find("preset"); it != kv.end()) {
    if (it->second == "llama3-8b")
      c = LlamaConfig::llama3_8b();
    else if (it->second == "tiny")
      c = mode == LlamaMode::decode ? LlamaConfig::tiny_decode() : LlamaConfig::tiny();
    else
      user_error() << "model: preset=" << it->second << " is unknown; use llama3-8b or tiny";
  }
  c.mode = mode;
  bool head_dim_given = kv.count("head_dim") > 0;
  for (const auto& [k, v] : kv) {
    if (k == "preset" || k == "mode") continue;
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
    else if (k == "paged_kv")
      c.paged_kv = page_size(v);
    else if (k == "kv_len") {
      c.kv_lens = kv_lengths(v);
      c.kv_len = *std::max_element(c.kv_lens.begin(), c.kv_lens.end());
      if (c.kv_lens.size() == 1) c.kv_lens.clear();
    } else if (k == "rope_scaling") {
      if (v != "none" && v != "llama3")
        user_error() << "model: rope_scaling=" << v << " is unknown; use none or llama3";
      c.rope_llama3_scaling = v == "llama3";
    } else if (k == "seed")
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
      user_error()
          << "model: unknown setting '" << k << "'; known: preset, mode, layers, "
          << "batch, seq, tokens, kv_len, paged_kv, hidden, heads, kv_heads, head_dim, ffn (mlp), "
          << "vocab, eps, rope_theta, rope_scaling, logits, seed, dtype";
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
  // A batch given after a ragged preset (tiny decode's three lengths) keeps the longest.
  if (kv.count("batch") && !kv.count("kv_len") && !c.kv_lens.empty() &&
      static_cast<int64_t>(c.kv_lens.size()) != c.batch)
    c.kv_lens.clear();
  if (c.decode() && (kv.count("seq") || kv.count("tokens") || kv.count("logits")))
    user_error() << "model: "
                 << (kv.count("seq")      ? "seq"
                     : kv.count("tokens") ? "tokens"
                                          : "logits")
                 << " is a prefill setting; a decode step runs one new token per sequence over "
                    "a cache of kv_len entries (set kv_len, batch)";
  if (!head_dim_given && (kv.count("hidden") || kv.count("heads"))) {
    if (c.hidden % c.heads)
      user_error() << "model: heads=" << c.heads << " does not divide hidden=" << c.hidden
                   << "; give head_dim explicitly";
    c.head_dim = c.hidden / c.heads;
  }
  c.validate();
  return c;
}

std::string mode_of_path(const std::string& path) {
  if (path == "llama-prefill") return "prefill";
  if (path == "llama-decode") return "decode";
  user_error() << "model path '" << path
               << "' is unknown; this build has llama-prefill and llama-decode (models/llama)";
  return {};
}

} // namespace tp::models
