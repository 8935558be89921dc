// The Llama model paths: weights, inputs, caches and the forward pass.
#include "llama/Llama.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "tilepilot/operator.h"

namespace tp::models {

namespace {

std::map<std::string, std::string> rope_options(const LlamaConfig& c) {
  return {{"base", std::to_string(std::llround(c.rope_theta))},
          {"scaling", c.rope_llama3_scaling ? "llama3" : "none"}};
}

/// Paged: the values fill_uniform(seed) gives the contiguous cache [B, Hkv, capacity, D],
/// each at its page slot of `table`; the tail of a last page past the capacity stays 0, so every
/// slot the attention can load is finite. Made on the host and uploaded: no device staging
/// buffer inflates the model's measured memory. One thread per sequence, up to the cores.
HostTensor paged_prefill(const LlamaConfig& c, const std::vector<int64_t>& table, uint64_t seed) {
  const int64_t B = c.batch, Hkv = c.kv_heads, D = c.head_dim, L = c.cache_capacity();
  const int64_t blk = c.paged_kv, MB = c.pages_per_seq();
  HostTensor pool(c.dtype, {c.cache_pages(), Hkv, blk, D});
  auto fill = [&](int64_t b) {
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t j = 0; j < L; ++j) {
        const int64_t page = table[static_cast<size_t>(b * MB + j / blk)];
        const int64_t to = ((page * Hkv + h) * blk + j % blk) * D,
                      from = ((b * Hkv + h) * L + j) * D;
        for (int64_t d = 0; d < D; ++d)
          pool.set(to + d, uniform_value(seed, static_cast<uint64_t>(from + d), 0.0, 1.0));
      }
  };
  const int64_t workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, B);
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      for (int64_t b = w; b < B; b += workers)
        fill(b);
    });
  for (std::thread& t : threads)
    t.join();
  return pool;
}

} // namespace

std::vector<int64_t> llama_block_table(const LlamaConfig& c) {
  const int64_t MB = c.pages_per_seq();
  std::vector<int64_t> order(static_cast<size_t>(c.cache_pages()));
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  std::mt19937_64 rng(c.seed * 1000003 + 17);
  for (size_t i = order.size(); i > 1; --i) // Fisher-Yates: the same order on every library
    std::swap(order[i - 1], order[rng() % i]);
  std::vector<int64_t> table(order.size(), -1);
  size_t next = 0;
  // First every sequence's own pages, then the free ones in the rows' remaining entries.
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t own = (c.kv_len_of(b) + 1 + c.paged_kv - 1) / c.paged_kv;
    for (int64_t j = 0; j < own; ++j)
      table[static_cast<size_t>(b * MB + j)] = order[next++];
  }
  for (int64_t& e : table)
    if (e < 0) e = order[next++];
  return table;
}

LlamaModel::LlamaModel(const LlamaConfig& c, Exec& ex) : c_(c), ex_(ex), k_((c.validate(), c)) {
  const int64_t T = c.tokens(), Hd = c.hidden, D = c.head_dim, H = c.heads, Hkv = c.kv_heads;
  const DType dt = c.dtype;
  next_seed_ = c.seed * 1000003 + 1;
  const std::vector<int64_t> table = c.paged() ? llama_block_table(c) : std::vector<int64_t>{};
  if (c.paged()) {
    table_ = ex_.alloc(DType::i32, {c.batch, c.pages_per_seq()});
    HostTensor t(DType::i32, table_.shape);
    for (size_t i = 0; i < table.size(); ++i)
      t.set(static_cast<int64_t>(i), static_cast<double>(table[i]));
    ex_.upload(table_, t);
    cache_bytes_ += table_.bytes();
  }
  auto proj = [&](int64_t out, int64_t in) {
    return weight({out, in}, 0.0, std::sqrt(3.0 / static_cast<double>(in)));
  };
  embed_ = weight({c.vocab, Hd}, 0.0, 1.0);
  for (int64_t l = 0; l < c.layers; ++l) {
    Layer L;
    L.attn_norm = weight({Hd}, 1.0, 0.1);
    L.wqkv = proj(c.qkv_dim(), Hd);
    L.wo = proj(Hd, c.q_dim());
    L.mlp_norm = weight({Hd}, 1.0, 0.1);
    L.w_gate_up = proj(2 * c.ffn, Hd);
    L.w_down = proj(Hd, c.ffn);
    if (c.decode()) {
      // The prefilled cache: random keys and values stand in for a prefill's. Paged, the same
      // values (same seeds, same contiguous indices) sit in their page slots.
      for (Buf* b : {&L.k_cache, &L.v_cache}) {
        if (c.paged()) {
          *b = ex_.alloc(dt, {c.cache_pages(), Hkv, c.paged_kv, D});
          ex_.upload(*b, paged_prefill(c, table, next_seed_++));
        } else {
          *b = ex_.alloc(dt, {c.batch, Hkv, c.cache_capacity(), D});
          ex_.fill_uniform(*b, next_seed_++, 0.0, 1.0);
        }
        cache_bytes_ += b->bytes();
      }
    }
    layers_.push_back(L);
  }
  final_norm_ = weight({Hd}, 1.0, 0.1);
  lm_head_ = proj(c.vocab, Hd);

  ids_ = act(DType::i32, {T});
  pos_ = act(DType::i32, {T});
  if (c.decode()) lens_ = act(DType::i32, {c.batch});
  upload_inputs();

  for (Buf* b : {&x_, &x2_, &xn_, &y_})
    *b = act(dt, {T, Hd});
  qkv_ = act(dt, {T, c.qkv_dim()});
  q_tok_ = act(dt, {T, H, D});
  k_tok_ = act(dt, {T, Hkv, D});
  q_rot_ = act(dt, {T, H, D});
  k_rot_ = act(dt, {T, Hkv, D});
  attn_ = act(dt, {T, c.q_dim()});
  gu_ = act(dt, {T, 2 * c.ffn});
  h_ = act(dt, {T, c.ffn});
  if (!c.decode()) {
    q_ = act(dt, {c.batch, H, c.seq, D});
    k_act_ = act(dt, {c.batch, Hkv, c.seq, D});
    v_ = act(dt, {c.batch, Hkv, c.seq, D});
    o_ = act(dt, {c.batch, H, c.seq, D});
    if (!c.all_logits)
      for (Buf* b : {&last_x_, &last_y_, &last_s_, &last_n_})
        *b = act(dt, {c.batch, Hd});
  }
  logits_ = act(dt, {c.logit_rows(), c.vocab});
}

void LlamaModel::upload_inputs() {
  // Token ids, positions and cache lengths are inputs, computed on the host.
  const int64_t T = c_.tokens();
  HostTensor ids(DType::i32, {T}), pos(DType::i32, {T});
  for (int64_t t = 0; t < T; ++t) {
    ids.set(t, std::floor(uniform_value(c_.seed + 7, t, 0.5, 0.5) * static_cast<double>(c_.vocab)));
    // Prefill: token t is position t mod seq of its sequence; decode: the new token of
    // sequence t follows its kv_len cached ones.
    pos.set(t, static_cast<double>(c_.decode() ? c_.kv_len_of(t) : t % c_.seq));
  }
  ex_.upload(ids_, ids);
  ex_.upload(pos_, pos);
  if (c_.decode()) {
    HostTensor lens(DType::i32, {c_.batch});
    for (int64_t b = 0; b < c_.batch; ++b)
      lens.set(b, static_cast<double>(c_.kv_len_of(b) + 1)); // the cache after the append
    ex_.upload(lens_, lens);
  }
}

Buf LlamaModel::weight(std::vector<int64_t> shape, double center, double half_width) {
  Buf b = ex_.alloc(c_.dtype, std::move(shape));
  ex_.fill_uniform(b, next_seed_++, center, half_width);
  weight_bytes_ += b.bytes();
  return b;
}

Buf LlamaModel::act(DType t, std::vector<int64_t> shape) {
  Buf b = ex_.alloc(t, std::move(shape));
  activation_bytes_ += b.bytes();
  return b;
}

void LlamaModel::op(const std::string& label, const std::function<void()>& body) {
  ex_.op_begin(label);
  body();
  ex_.op_end(label);
}

void LlamaModel::attention_block(const Layer& L) {
  const int64_t B = c_.batch, H = c_.heads, D = c_.head_dim;
  op("gemm.qkv", [&] { ex_.dispatch("gemm", {xn_, L.wqkv, qkv_}, {{"layout", "nt"}}); });
  op("split_qk", [&] { ex_.run(k_.split_qk, {&qkv_, &q_tok_, &k_tok_}); });
  op("rope", [&] {
    ex_.dispatch("rope", {q_tok_, k_tok_, pos_, q_rot_, k_rot_}, rope_options(c_));
  });
  if (c_.decode()) {
    op("cache_append", [&] {
      if (c_.paged())
        ex_.run(k_.cache_append_paged, {&k_rot_, &qkv_, &pos_, &table_, &L.k_cache, &L.v_cache});
      else
        ex_.run(k_.cache_append, {&k_rot_, &qkv_, &pos_, &L.k_cache, &L.v_cache});
    });
    // One query token per sequence: q [B, H, D] and the output [B, H D] are [B, H, 1, D].
    const Buf q = q_rot_.reshaped({B, H, 1, D}), out = attn_.reshaped({B, H, 1, D});
    op("decode_attention", [&] {
      if (c_.paged())
        ex_.dispatch("decode_attention", {q, L.k_cache, L.v_cache, table_, lens_, out});
      else
        ex_.dispatch("decode_attention", {q, L.k_cache, L.v_cache, lens_, out});
    });
  } else {
    op("to_heads", [&] { ex_.run(k_.to_heads, {&q_rot_, &k_rot_, &qkv_, &q_, &k_act_, &v_}); });
    op("attention", [&] { ex_.dispatch("attention", {q_, k_act_, v_, o_}, {{"causal", "1"}}); });
    op("merge_heads", [&] { ex_.run(k_.merge_heads, {&o_, &attn_}); });
  }
  op("gemm.o", [&] { ex_.dispatch("gemm", {attn_, L.wo, y_}, {{"layout", "nt"}}); });
}

const Buf& LlamaModel::forward() {
  // x holds the residual stream; a fused norm writes x + y into s, which becomes x.
  Buf *x = &x_, *s = &x2_;
  auto norm_residual = [&](const Buf& w) {
    op("rmsnorm", [&] { ex_.dispatch("rmsnorm", {*x, y_, w, *s, xn_}); });
    std::swap(x, s);
  };
  op("embedding", [&] { ex_.run(k_.embedding, {&ids_, &embed_, x}); });
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    if (l == 0)
      op("rmsnorm", [&] { ex_.dispatch("rmsnorm", {*x, L.attn_norm, xn_}); });
    else
      norm_residual(L.attn_norm); // the previous layer's MLP output joins the stream here
    attention_block(L);
    norm_residual(L.mlp_norm);
    op("gemm.gate_up", [&] { ex_.dispatch("gemm", {xn_, L.w_gate_up, gu_}, {{"layout", "nt"}}); });
    op("swiglu", [&] { ex_.dispatch("swiglu", {gu_, h_}); });
    op("gemm.down", [&] { ex_.dispatch("gemm", {h_, L.w_down, y_}, {{"layout", "nt"}}); });
  }
  const Buf* normed = &xn_;
  if (!c_.decode() && !c_.all_logits) {
    // Only the last token of each sequence reaches the LM head: gather both halves of the
    // last residual add, then add and norm them in one call.
    op("gather_last", [&] {
      ex_.run(k_.gather_last, {x, &last_x_});
      ex_.run(k_.gather_last, {&y_, &last_y_});
    });
    op("rmsnorm", [&] {
      ex_.dispatch("rmsnorm", {last_x_, last_y_, final_norm_, last_s_, last_n_});
    });
    normed = &last_n_;
  } else {
    norm_residual(final_norm_);
  }
  op("gemm.lm_head", [&] {
    ex_.dispatch("gemm", {*normed, lm_head_, logits_}, {{"layout", "nt"}});
  });
  return logits_;
}

std::vector<std::pair<std::string, ops::Problem>> LlamaModel::problems() const {
  return llama_problems(c_);
}

std::vector<std::pair<std::string, ops::Problem>> llama_problems(const LlamaConfig& c) {
  using Shapes = std::vector<std::vector<int64_t>>;
  const DType dt = c.dtype, i32 = DType::i32;
  // The problems the operators derive from the tensors the forward pass hands them.
  auto problem = [&](const std::string& op, const Shapes& shapes, std::vector<DType> types,
                     const std::map<std::string, std::string>& options = {}) {
    if (types.size() == 1) types.assign(shapes.size(), types[0]);
    return ops::find_operator(op).problem_for(shapes, types, options);
  };
  auto gemm = [&](int64_t M, int64_t N, int64_t K) {
    return problem("gemm", {{M, K}, {N, K}, {M, N}}, {dt}, {{"layout", "nt"}});
  };
  const int64_t T = c.tokens(), Hd = c.hidden, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  const int64_t B = c.batch, F = c.ffn;
  std::vector<std::pair<std::string, ops::Problem>> out = {
      {"gemm.qkv", gemm(T, c.qkv_dim(), Hd)},
      {"gemm.o", gemm(T, Hd, c.q_dim())},
      {"gemm.gate_up", gemm(T, 2 * F, Hd)},
      {"gemm.down", gemm(T, Hd, F)},
      {"gemm.lm_head", gemm(c.logit_rows(), c.vocab, Hd)}};
  if (c.decode()) {
    const int64_t Lc = c.cache_capacity();
    if (c.paged()) {
      const std::vector<int64_t> pool = {c.cache_pages(), Hkv, c.paged_kv, D};
      out.emplace_back(
          "decode_attention",
          problem("decode_attention",
                  {{B, H, 1, D}, pool, pool, {B, c.pages_per_seq()}, {B}, {B, H, 1, D}},
                  {dt, dt, dt, i32, i32, dt}));
    } else {
      out.emplace_back("decode_attention",
                       problem("decode_attention",
                               {{B, H, 1, D}, {B, Hkv, Lc, D}, {B, Hkv, Lc, D}, {B}, {B, H, 1, D}},
                               {dt, dt, dt, i32, dt}));
    }
  } else {
    out.emplace_back(
        "attention",
        problem("attention",
                {{B, H, c.seq, D}, {B, Hkv, c.seq, D}, {B, Hkv, c.seq, D}, {B, H, c.seq, D}}, {dt},
                {{"causal", "1"}}));
  }
  out.emplace_back("rmsnorm", problem("rmsnorm", {{T, Hd}, {Hd}, {T, Hd}}, {dt}));
  out.emplace_back("rmsnorm.residual",
                   problem("rmsnorm", {{T, Hd}, {T, Hd}, {Hd}, {T, Hd}, {T, Hd}}, {dt}));
  if (!c.decode() && !c.all_logits)
    out.emplace_back("rmsnorm.final",
                     problem("rmsnorm", {{B, Hd}, {B, Hd}, {Hd}, {B, Hd}, {B, Hd}}, {dt}));
  out.emplace_back("rope", problem("rope", {{T, H, D}, {T, Hkv, D}, {T}, {T, H, D}, {T, Hkv, D}},
                                   {dt, dt, i32, dt, dt}, rope_options(c)));
  out.emplace_back("swiglu", problem("swiglu", {{T, 2 * F}, {T, F}}, {dt}));
  // One entry per distinct problem (a batch of one makes the final norm the residual one).
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<std::pair<std::string, ops::Problem>> distinct;
  for (auto& [label, p] : out)
    if (seen.insert({p.op, p.shape_str() + dtype_name(p.dtype)}).second)
      distinct.emplace_back(label, p);
  return distinct;
}

} // namespace tp::models
