// The per-block work both decode_attention kernels share (see AttendKeys.h).
#include "ops/decode_attention/AttendKeys.h"

#include <algorithm>
#include <cmath>

#include "ops/decode_attention/DecodeAttention.h"
#include "tilepilot/tilepilot.h"

namespace tp::ops::decode_attention {

namespace {
constexpr double kLog2e = 1.4426950408889634;
} // namespace

Inputs make_inputs(const Problem& p, const Config& c) {
  const int64_t Sq = p.at("Sq"), D = p.at("D"), bn = c.at("bn");
  const bool pg = paged(p);
  const DType dt = p.dtype;
  Dim Bd("B"), H("H"), Hkv("Hkv"), L("L"), NP("num_blocks"), MB("max_blocks");
  Tensor Q("q", {Bd, H, Sq, D}, dt);
  Tensor K = pg ? Tensor("k_cache", {NP, Hkv, bn, D}, dt) : Tensor("k", {Bd, Hkv, L, D}, dt);
  Tensor V = pg ? Tensor("v_cache", {NP, Hkv, bn, D}, dt) : Tensor("v", {Bd, Hkv, L, D}, dt);
  Tensor table("block_table", {Bd, MB}, i32), lens("lens", {Bd}, i32);
  std::vector<Tensor> params = {Q, K, V};
  if (pg) params.push_back(table);
  if (has_lens(p)) params.push_back(lens);
  return Inputs{Bd, H, Hkv, L, Q, K, V, table, lens, params};
}

std::string kernel_tag(const Problem& p, const Config& c) {
  const bool pg = paged(p);
  return "_d" + std::to_string(p.at("D")) + "_g" + std::to_string(p.at("H") / p.at("Hkv")) + "_sq" +
         std::to_string(p.at("Sq")) + (pg ? "_paged" + std::to_string(c.at("bn")) : "") +
         (has_lens(p) && !pg ? "_lens" : "");
}

Expr seq_len(const Problem& p, const Inputs& in, const Expr& b) {
  return has_lens(p) ? Expr(in.lens(b)) : Expr(in.L);
}

Partial attend_keys(const Problem& p, const Config& c, const Inputs& in, const Expr& rx,
                    const Expr& hk, const Expr& b, const Expr& len, const Expr& kb0,
                    const Expr& count) {
  const int64_t G = p.at("H") / p.at("Hkv"), Sq = p.at("Sq"), D = p.at("D");
  const int64_t bm = c.at("bm"), bn = c.at("bn"), hpt = heads_per_tile(p, c), rows = hpt * Sq;
  const int stages = static_cast<int>(c.at("stages"));
  const DType dt = p.dtype;
  const double qk_scale = 1.0 / std::sqrt(static_cast<double>(D)) * kLog2e;
  const Tensor &Q = in.q, &K = in.k, &V = in.v, &table = in.table;
  Tile Qs = alloc_shared({bm, D}, dt), Ks = alloc_shared({bn, D}, dt);
  Tile Vs = alloc_shared({bn, D}, dt);
  Tile s = alloc_fragment({bm, bn}, f32), pr = alloc_fragment({bm, bn}, dt);
  Tile o = alloc_fragment({bm, D}, f32);
  Tile m = alloc_fragment({bm}, f32), m_prev = alloc_fragment({bm}, f32);
  Tile m_scaled = alloc_fragment({bm}, f32), l = alloc_fragment({bm}, f32);
  Tile row_sum = alloc_fragment({bm}, f32), corr = alloc_fragment({bm}, f32);
  // Rows past the tile's heads (or past the group) repeat its last row, so every load stays
  // inside q.
  auto row = [&](const Expr& i) { return min(i, rows - 1); };
  auto head = [&](const Expr& i) { return min(rx * hpt + row(i) / Sq, G - 1); };
  parallel({bm, D}, [&](Var i, Var d) { Qs(i, d) = Q(b, hk * G + head(i), row(i) % Sq, d); });
  clear(o);
  clear(l);
  fill(m, -infinity());
  const int64_t* first = kb0.as_int();
  pipelined(count, stages, [&](Var kk) {
    Expr kb = first && *first == 0 ? Expr(kk) : kb0 + kk;
    if (paged(p)) {
      Expr page = table(b, kb);
      copy(K.tile(page, hk, 0, 0), Ks);
      copy(V.tile(page, hk, 0, 0), Vs);
    } else {
      copy(K.tile(b, hk, kb * bn, 0), Ks);
      copy(V.tile(b, hk, kb * bn, 0), Vs);
    }
    gemm(Qs, Ks, s, {.trans_b = true, .clear = true});
    // Token t sees keys j < len - Sq + t + 1; token 0 sees the fewest, so a step wholly below
    // its limit needs no mask.
    if_then(kb * bn + bn > len - Sq + 1, [&] {
      parallel({bm, bn}, [&](Var i, Var j) {
        Expr ok = kb * bn + j < len - Sq + row(i) % Sq + 1;
        s(i, j) = select(ok, s(i, j), -infinity());
      });
    });
    copy(m, m_prev);
    reduce_max(s, m, 1, /*clear=*/false);
    // A row that has seen no visible key keeps m = -inf; m_scaled = 0 keeps its terms
    // exp2(-inf) = 0 instead of NaN (attention's rule).
    parallel({bm}, [&](Var i) {
      m_scaled(i) = select(m(i) == -infinity(), 0.0, m(i) * qk_scale);
      corr(i) = exp2(m_prev(i) * qk_scale - m_scaled(i));
    });
    parallel({bm, bn}, [&](Var i, Var j) { s(i, j) = exp2(s(i, j) * qk_scale - m_scaled(i)); });
    reduce_sum(s, row_sum, 1);
    parallel({bm}, [&](Var i) { l(i) = l(i) * corr(i) + row_sum(i); });
    parallel({bm, D}, [&](Var i, Var d) { o(i, d) = o(i, d) * corr(i); });
    copy(s, pr);
    gemm(pr, Vs, o);
  });
  return Partial{o, l, m};
}

} // namespace tp::ops::decode_attention
