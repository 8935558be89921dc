// The Llama prefill: weights, tables and the forward pass.
#include "llama/Llama.h"

#include <cmath>

namespace tp::models {

LlamaModel::LlamaModel(const LlamaConfig& c, Exec& ex) : c_(c), ex_(ex), k_(c) {
  c_.validate();
  const int64_t T = c.tokens(), Hd = c.hidden, D = c.head_dim;
  const DType dt = c.dtype;
  next_seed_ = c.seed * 1000003 + 1;
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
    layers_.push_back(L);
  }
  final_norm_ = weight({Hd}, 1.0, 0.1);
  lm_head_ = proj(c.vocab, Hd);

  // Token ids and the rotary tables are inputs, computed on the host in double precision.
  HostTensor ids(DType::i32, {T});
  for (int64_t t = 0; t < T; ++t)
    ids.set(t, std::floor(uniform_value(c.seed + 7, t, 0.5, 0.5) * static_cast<double>(c.vocab)));
  HostTensor cs(DType::f32, {c.seq, D / 2}), sn(DType::f32, {c.seq, D / 2});
  for (int64_t s = 0; s < c.seq; ++s)
    for (int64_t d = 0; d < D / 2; ++d) {
      double angle = s * std::pow(c.rope_theta, -2.0 * d / static_cast<double>(D));
      cs.set(s * D / 2 + d, std::cos(angle));
      sn.set(s * D / 2 + d, std::sin(angle));
    }
  ids_ = act(DType::i32, {T});
  cos_ = act(DType::f32, {c.seq, D / 2});
  sin_ = act(DType::f32, {c.seq, D / 2});
  ex_.upload(ids_, ids);
  ex_.upload(cos_, cs);
  ex_.upload(sin_, sn);

  x_ = act(dt, {T, Hd});
  xn_ = act(dt, {T, Hd});
  qkv_ = act(dt, {T, c.qkv_dim()});
  q_ = act(dt, {c.batch, c.heads, c.seq, D});
  k_act_ = act(dt, {c.batch, c.kv_heads, c.seq, D});
  v_ = act(dt, {c.batch, c.kv_heads, c.seq, D});
  o_ = act(dt, {c.batch, c.heads, c.seq, D});
  attn_ = act(dt, {T, c.q_dim()});
  y_ = act(dt, {T, Hd});
  gu_ = act(dt, {T, 2 * c.ffn});
  h_ = act(dt, {T, c.ffn});
  if (!c.all_logits) {
    last_ = act(dt, {c.batch, Hd});
    last_n_ = act(dt, {c.batch, Hd});
  }
  logits_ = act(dt, {c.logit_rows(), c.vocab});
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

const Buf& LlamaModel::forward() {
  op("embedding", [&] { ex_.run(k_.embedding, {&ids_, &embed_, &x_}); });
  for (const Layer& L : layers_) {
    op("rmsnorm", [&] { ex_.run(k_.rmsnorm, {&x_, &L.attn_norm, &xn_}); });
    op("gemm.qkv", [&] { ex_.gemm(xn_, L.wqkv, qkv_, "nt"); });
    op("rope", [&] { ex_.run(k_.rope_split, {&qkv_, &cos_, &sin_, &q_, &k_act_, &v_}); });
    op("attention", [&] { ex_.attention(q_, k_act_, v_, o_, /*causal=*/true); });
    op("merge_heads", [&] { ex_.run(k_.merge_heads, {&o_, &attn_}); });
    op("gemm.o", [&] { ex_.gemm(attn_, L.wo, y_, "nt"); });
    op("residual", [&] { ex_.run(k_.residual_add, {&x_, &y_}); });
    op("rmsnorm", [&] { ex_.run(k_.rmsnorm, {&x_, &L.mlp_norm, &xn_}); });
    op("gemm.gate_up", [&] { ex_.gemm(xn_, L.w_gate_up, gu_, "nt"); });
    op("swiglu", [&] { ex_.run(k_.swiglu, {&gu_, &h_}); });
    op("gemm.down", [&] { ex_.gemm(h_, L.w_down, y_, "nt"); });
    op("residual", [&] { ex_.run(k_.residual_add, {&x_, &y_}); });
  }
  const Buf* final_in = &x_;
  const Buf* normed = &xn_;
  if (!c_.all_logits) {
    op("gather_last", [&] { ex_.run(k_.gather_last, {&x_, &last_}); });
    final_in = &last_;
    normed = &last_n_;
  }
  op("rmsnorm", [&] { ex_.run(k_.rmsnorm, {final_in, &final_norm_, normed}); });
  op("gemm.lm_head", [&] { ex_.gemm(*normed, lm_head_, logits_, "nt"); });
  return logits_;
}

std::vector<std::pair<std::string, ops::Problem>> LlamaModel::problems() const {
  return llama_problems(c_);
}

std::vector<std::pair<std::string, ops::Problem>> llama_problems(const LlamaConfig& c) {
  auto gemm = [&](int64_t M, int64_t N, int64_t K) {
    return ops::parse_problem("gemm",
                              {{"M", std::to_string(M)},
                               {"N", std::to_string(N)},
                               {"K", std::to_string(K)},
                               {"layout", "nt"}},
                              c.dtype);
  };
  const int64_t T = c.tokens();
  ops::Problem attn = ops::parse_problem("attention",
                                         {{"B", std::to_string(c.batch)},
                                          {"H", std::to_string(c.heads)},
                                          {"Hkv", std::to_string(c.kv_heads)},
                                          {"S", std::to_string(c.seq)},
                                          {"Skv", std::to_string(c.seq)},
                                          {"D", std::to_string(c.head_dim)},
                                          {"causal", "1"}},
                                         c.dtype);
  return {{"gemm.qkv", gemm(T, c.qkv_dim(), c.hidden)},
          {"gemm.o", gemm(T, c.hidden, c.q_dim())},
          {"gemm.gate_up", gemm(T, 2 * c.ffn, c.hidden)},
          {"gemm.down", gemm(T, c.hidden, c.ffn)},
          {"gemm.lm_head", gemm(c.logit_rows(), c.vocab, c.hidden)},
          {"attention", attn}};
}

} // namespace tp::models
