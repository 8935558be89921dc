// Split-KV decode attention (see SplitKv.h): the split kernel, the combine kernel, their
// intermediates and the rule that picks the split count.
//
// The split kernel is DecodeAttention.cpp's kernel (the same block work, AttendKeys.h) with
// the grid's x extended over splits: block x takes query-head tile x % tiles and
// split x / tiles, so the tiles of one KV head that read the same keys run side by side. Split
// z of a sequence of nb = ceil(len / bn) key blocks (pages when paged) takes the contiguous
// blocks [z per, z per + per), per = ceil(nb / splits), clipped to nb: the splits share each
// sequence's own length, and trailing splits of a short one are empty.
#include "ops/decode_attention/SplitKv.h"

#include <algorithm>
#include <cmath>

#include "ops/decode_attention/AttendKeys.h"
#include "ops/decode_attention/DecodeAttention.h"
#include "tilepilot/tilepilot.h"

namespace tp::ops::decode_attention {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

} // namespace

int64_t splits_of(const Config& c) {
  auto it = c.find("splits");
  if (it == c.end())
    user_error() << "decode_attention: the split-KV kernels need splits= in the config (1.."
                 << kMaxSplits << "; choose_splits gives one for a GPU)";
  if (it->second < 1 || it->second > kMaxSplits)
    user_error() << "decode_attention: splits=" << it->second << " is outside 1.." << kMaxSplits
                 << "; the combine merges at most " << kMaxSplits << " partials";
  return it->second;
}

Kernel build_split(const Problem& p, const Config& c) {
  validate(p, c);
  const int64_t ns = splits_of(c);
  const int64_t G = p.at("H") / p.at("Hkv"), Sq = p.at("Sq"), D = p.at("D");
  const int64_t bn = c.at("bn"), hpt = heads_per_tile(p, c), rows = hpt * Sq;
  const int64_t tiles = ceil_div(G, hpt);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Inputs in = make_inputs(p, c);
  Tensor Op("o_part", {in.B, in.H, ns, Sq, D}, f32), Lp("lse_part", {in.B, in.H, ns, Sq}, f32);
  std::vector<Tensor> params = in.params;
  params.push_back(Op);
  params.push_back(Lp);
  return kernel("decode_attention_split" + kernel_tag(p, c) + "_s" + std::to_string(ns), params,
                grid(tiles * ns, in.Hkv, in.B), threads(static_cast<int>(c.at("threads"))),
                [&](Var x, Var hk, Var b) {
                  Expr rx = tiles > 1 ? Expr(let("rx", x % tiles)) : Expr(0);
                  Expr z = tiles > 1 ? Expr(let("z", x / tiles)) : Expr(x);
                  Var len = let("len", seq_len(p, in, b));
                  // Token t sees keys j < len - Sq + t + 1: at most len, so nb steps over all
                  // splits.
                  Var nb = let("nb", ceildiv(len, bn));
                  Var per = let("per", ceildiv(nb, ns));
                  Var kb0 = let("kb0", z * per);
                  Partial r =
                      attend_keys(p, c, in, rx, hk, b, len, kb0, max(min(per, nb - kb0), 0));
                  // A row that saw no key in this split (an empty split, an empty sequence, a token
                  // whose keys all lie elsewhere) has l = 0: o_part 0 and lse -inf, weight 0 in the
                  // combine. Otherwise l = sum exp((s - m) scale), so lse = m scale + ln l.
                  auto stored = [&](const Expr& i) { return i < rows && rx * hpt + i / Sq < G; };
                  parallel({c.at("bm"), D}, [&](Var i, Var d) {
                    if_then(stored(i), [&] {
                      Op(b, hk * G + rx * hpt + i / Sq, z, i % Sq, d) =
                          select(r.l(i) > 0, r.o(i, d) / r.l(i), 0.0);
                    });
                  });
                  parallel({c.at("bm")}, [&](Var i) {
                    if_then(stored(i), [&] {
                      Lp(b, hk * G + rx * hpt + i / Sq, z, i % Sq) =
                          select(r.l(i) > 0, r.m(i) * scale + log(r.l(i)), -infinity());
                    });
                  });
                });
}

Kernel build_combine(const Problem& p, const Config& c) {
  const int64_t ns = splits_of(c), Sq = p.at("Sq"), D = p.at("D");
  Dim Bd("B"), H("H");
  Tensor Op("o_part", {Bd, H, ns, Sq, D}, f32), Lp("lse_part", {Bd, H, ns, Sq}, f32);
  Tensor O("out", {Bd, H, Sq, D}, p.dtype);
  // One block per (head, sequence), over its Sq x D outputs: a thread per 16-byte run of 4
  // f32 in whole warps, at most 4 (Sq=1 at D=128 is one warp; more would idle).
  const int nthreads = static_cast<int>(std::min<int64_t>(128, ceil_div(Sq * D / 4, 32) * 32));
  return kernel(
      "decode_attention_combine_d" + std::to_string(D) + "_sq" + std::to_string(Sq) + "_s" +
          std::to_string(ns),
      {Op, Lp, O}, grid(H, Bd), threads(nthreads), [&](Var h, Var b) {
        Tile lse = alloc_fragment({ns, Sq}, f32), w = alloc_fragment({ns, Sq}, f32);
        Tile ws = alloc_shared({ns, Sq}, f32); // read by every thread of the loop below
        Tile mx = alloc_fragment({Sq}, f32), total = alloc_fragment({Sq}, f32);
        Tile part = alloc_fragment({Sq, D}, f32), o = alloc_fragment({Sq, D}, f32);
        copy(Lp.tile(b, h, 0, 0), lse);
        reduce_max(lse, mx, 0);
        // A token no split saw a key for has every lse = -inf: a finite shift keeps its
        // weights exp(-inf) = 0 (not NaN), so its total is 0 and its output 0.
        parallel({Sq}, [&](Var t) { mx(t) = select(mx(t) == -infinity(), 0.0, mx(t)); });
        parallel({ns, Sq}, [&](Var z, Var t) { w(z, t) = exp(lse(z, t) - mx(t)); });
        reduce_sum(w, total, 0);
        // The weights are normalised here, so that the loop below is all the per-element work
        // and the outputs' tile never meets the per-token totals' layout. One split gets
        // weight exp(0) / 1 = 1: out is its partial exactly.
        parallel({ns, Sq},
                 [&](Var z, Var t) { w(z, t) = select(total(t) > 0, w(z, t) / total(t), 0.0); });
        copy(w, ws);
        clear(o);
        // Unrolled: the partials' loads are independent, so they are all in flight at once.
        unrolled(ns, [&](Var z) {
          copy(Op.tile(b, h, z, 0, 0), part);
          parallel({Sq, D}, [&](Var t, Var d) { o(t, d) = o(t, d) + ws(z, t) * part(t, d); });
        });
        copy(o, O.tile(b, h, 0, 0));
      });
}

std::vector<ArgSpec> split_intermediates(const Problem& p, const Config& c) {
  const int64_t ns = splits_of(c), B = p.at("B"), H = p.at("H"), Sq = p.at("Sq");
  return {{DType::f32, {B, H, ns, Sq, p.at("D")}}, {DType::f32, {B, H, ns, Sq}}};
}

// The rule: at most one block per SM. Today's kernel at B=16 on Llama-3-8B (128 blocks on 132
// SMs, one each) measured 4.34 TB/s, near the H200's HBM bandwidth, so a grid that already fills
// three quarters of the SMs is not split: the partials' round trip would buy nothing. Smaller
// grids get splits = floor(sm_count / blocks): a block of the default config takes a whole SM
// (its warp-specialized warpgroups hold 240 registers a thread), so one more split would start a
// second wave. Measured on the H200 at B=8, Hkv=8, L=8192 (64 blocks, 2026-12-03): 2 splits
// 0.082 ms, 3 (the ceiling this rule used before: 192 blocks, 1.45 waves) 0.100 ms, 4 0.089 ms.
// No split is shorter than kMinBlocksPerSplit key blocks of the longest sequence (a split's
// fixed cost, its Q load and its partial's store, stays small against its keys) and there are
// at most kMaxSplits. The count is then evened out so that every split of a full-length
// sequence gets the same number of key blocks and none is empty.
int64_t choose_splits(const Problem& p, const Config& c, int sm_count) {
  constexpr int64_t kMinBlocksPerSplit = 4;
  if (sm_count < 1)
    user_error() << "decode_attention: choose_splits needs the device's SM count (>= 1), got "
                 << sm_count;
  const int64_t G = p.at("H") / p.at("Hkv");
  const int64_t blocks = p.at("B") * p.at("Hkv") * ceil_div(G, heads_per_tile(p, c));
  if (4 * blocks >= 3 * int64_t{sm_count}) return 1;
  const int64_t nb = ceil_div(p.at("L"), c.at("bn"));
  int64_t splits = std::max<int64_t>(1, sm_count / blocks);
  splits = std::min({splits, std::max<int64_t>(1, nb / kMinBlocksPerSplit), kMaxSplits});
  return ceil_div(nb, ceil_div(nb, splits));
}

} // namespace tp::ops::decode_attention
