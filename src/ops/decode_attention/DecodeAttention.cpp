// decode_attention's kernel, parsing, inputs and fp64 reference (see DecodeAttention.h).
//
// The kernel: one block per (tile of query heads, KV head, sequence). Its rows are the query
// heads sharing the KV head (as many whole heads as bm rows hold: all G = H / Hkv of them at
// Llama-3's 4 x Sq <= 64) times the Sq query tokens, row i = head i / Sq, token i % Sq, padded
// to bm; so grouped heads read each K and V tile once for all of them. It walks its sequence's
// whole cache (bn keys, or one page through the block table, a step) with lesson 13's online
// softmax in the log2 domain and writes the normalised output. It does not split the keys over
// blocks: split-KV (lesson 14) needs a second kernel, or a grid-wide barrier, to merge the
// partials through their log-sum-exp, and Operator::build returns one kernel. So at small
// batch the grid is only B x Hkv blocks (B=1: 8 on Llama-3-8B).
#include "ops/decode_attention/DecodeAttention.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "ops/ParseHelpers.h"
#include "tilepilot/tilepilot.h"

namespace tp::ops::decode_attention {

namespace {

constexpr double kLog2e = 1.4426950408889634;
const char* kOp = "decode_attention";

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

} // namespace

Problem parse(const std::map<std::string, std::string>& kv, DType dtype) {
  reject_unknown(kv, {"B", "H", "Hkv", "Sq", "D", "L", "paged", "block", "pages", "lens"}, kOp);
  const std::string ex = "B=8,H=32,Hkv=8,D=128,L=4096";
  Problem p;
  p.op = kOp;
  p.dtype = dtype;
  for (const char* k : {"B", "H", "D", "L"})
    p.shape[k] = require_positive(kv, k, kOp, ex);
  p.shape["Hkv"] = optional_int(kv, "Hkv", p.shape["H"], kOp);
  p.shape["Sq"] = optional_int(kv, "Sq", 1, kOp);
  p.shape["paged"] = optional_int(kv, "paged", 0, kOp, true);
  const int64_t H = p.shape["H"], Hkv = p.shape["Hkv"], D = p.shape["D"], L = p.shape["L"];
  if (H % Hkv)
    user_error() << kOp << ": Hkv=" << Hkv << " does not divide H=" << H
                 << "; each KV head serves H / Hkv query heads";
  if (p.shape["Sq"] > 8)
    user_error() << kOp << ": Sq=" << p.shape["Sq"]
                 << " query tokens per sequence is more than 8; use attention for a prefill";
  if (D != 64 && D != 128) user_error() << kOp << ": D=" << D << " is not supported; use 64 or 128";
  if (p.shape["paged"] > 1)
    user_error() << kOp << ": paged=" << p.shape["paged"] << " must be 0 or 1";
  if (p.shape["paged"]) {
    int64_t block = optional_int(kv, "block", 16, kOp);
    if (block % 16 || block > 256 || (block & (block - 1)))
      user_error() << kOp << ": block=" << block
                   << " is not a supported page size; use 16, 32, 64, 128 or 256";
    p.shape["block"] = block;
    if (kv.count("pages")) {
      const int64_t least = p.shape["B"] * ceil_div(L, block);
      p.shape["pages"] = require_positive(kv, "pages", kOp, ex);
      if (p.shape["pages"] < least)
        user_error() << kOp << ": pages=" << p.shape["pages"]
                     << " is fewer than B x ceil(L / block) = " << least
                     << ", the pages the sequences hold";
    }
  } else {
    for (const char* k : {"block", "pages"})
      if (kv.count(k))
        user_error() << kOp << ": " << k << "= describes a paged cache; add paged=1 or drop it";
  }
  if (L > 2147483647 / 128)
    user_error() << kOp << ": L=" << L << " is too long for the i32 key index";
  if (dtype != DType::bf16 && dtype != DType::f16)
    user_error() << kOp << ": dtype " << dtype_name(dtype) << " is not supported; use bf16 or f16";
  if (kv.count("lens") && kv.at("lens") == "runtime") {
    p.options["lens"] = "runtime"; // a problem made from tensors: the lens tensor holds them
  } else if (kv.count("lens")) {
    std::stringstream ss(kv.at("lens"));
    std::string item;
    int64_t n = 0;
    while (std::getline(ss, item, ':')) {
      int64_t x = -1;
      try {
        size_t pos;
        x = std::stoll(item, &pos);
        if (pos != item.size()) x = -1;
      } catch (const std::exception&) {}
      if (x < 0 || x > L)
        user_error() << kOp << ": lens entry '" << item << "' must be an integer in [0, L=" << L
                     << "]";
      ++n;
    }
    if (n != p.shape["B"])
      user_error() << kOp << ": lens has " << n << " entries but B=" << p.shape["B"]
                   << "; give one cache length per sequence, colon-separated";
    p.options["lens"] = kv.at("lens");
  }
  return p;
}

bool paged(const Problem& p) {
  return p.get("paged", 0) != 0;
}

bool has_lens(const Problem& p) {
  return paged(p) || p.options.count("lens") > 0;
}

std::vector<int64_t> lengths(const Problem& p) {
  // "runtime": a problem made from tensors, whose lens tensor holds the lengths.
  if (!p.options.count("lens") || p.options.at("lens") == "runtime")
    return std::vector<int64_t>(p.at("B"), p.at("L"));
  std::vector<int64_t> out;
  std::stringstream ss(p.options.at("lens"));
  for (std::string item; std::getline(ss, item, ':');)
    out.push_back(std::stoll(item));
  return out;
}

int64_t pages_per_seq(const Problem& p) {
  return paged(p) ? ceil_div(p.at("L"), p.at("block")) : 0;
}

int64_t num_pages(const Problem& p) {
  return p.get("pages", p.at("B") * pages_per_seq(p));
}

int lens_index(const Problem& p) {
  return paged(p) ? 4 : has_lens(p) ? 3 : -1;
}

int out_index(const Problem& p) {
  return paged(p) ? 5 : has_lens(p) ? 4 : 3;
}

Config default_config(const Problem& p, const std::string& arch) {
  const int64_t GS = p.at("H") / p.at("Hkv") * p.at("Sq");
  // The GPU tile is one wgmma M (64 rows): Llama-3-8B's 4 grouped heads fill 4 of them, but
  // the kernel is bound by reading K and V, not by the tensor cores. The interpreter takes the
  // smallest tile that holds the rows. A prior, not yet measured.
  const int64_t bm = arch == "cpu" ? std::min<int64_t>(64, ceil_div(GS, 16) * 16) : 64;
  const int64_t bn = paged(p) ? p.at("block") : 64;
  return {{"bm", bm}, {"bn", bn}, {"stages", 2}, {"threads", 128}};
}

int64_t heads_per_tile(const Problem& p, const Config& c) {
  return std::min(p.at("H") / p.at("Hkv"), c.at("bm") / p.at("Sq"));
}

void validate(const Problem& p, const Config& c) {
  // Each knob's domain is its Knob's (check_config); these are the rules with the problem.
  const int64_t bn = c.at("bn");
  if (paged(p) && bn != p.at("block"))
    user_error() << kOp << ": bn=" << bn << " must equal the page size block=" << p.at("block")
                 << " for a paged cache (a step reads one page)";
}

Kernel build(const Problem& p, const Config& c) {
  validate(p, c);
  const int64_t G = p.at("H") / p.at("Hkv"), Sq = p.at("Sq"), D = p.at("D");
  const int64_t bm = c.at("bm"), bn = c.at("bn"), hpt = heads_per_tile(p, c), rows = hpt * Sq;
  const int stages = static_cast<int>(c.at("stages"));
  const bool pg = paged(p), lens_in = has_lens(p);
  const DType dt = p.dtype;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D)), qk_scale = scale * kLog2e;
  Dim Bd("B"), H("H"), Hkv("Hkv"), L("L"), NP("num_blocks"), MB("max_blocks");
  Tensor Q("q", {Bd, H, Sq, D}, dt), O("out", {Bd, H, Sq, D}, dt);
  Tensor K = pg ? Tensor("k_cache", {NP, Hkv, bn, D}, dt) : Tensor("k", {Bd, Hkv, L, D}, dt);
  Tensor V = pg ? Tensor("v_cache", {NP, Hkv, bn, D}, dt) : Tensor("v", {Bd, Hkv, L, D}, dt);
  Tensor table("block_table", {Bd, MB}, i32), lens("lens", {Bd}, i32);
  std::vector<Tensor> params = {Q, K, V};
  if (pg) params.push_back(table);
  if (lens_in) params.push_back(lens);
  params.push_back(O);
  std::string name = "decode_attention_d" + std::to_string(D) + "_g" + std::to_string(G) + "_sq" +
                     std::to_string(Sq) + (pg ? "_paged" + std::to_string(bn) : "") +
                     (lens_in && !pg ? "_lens" : "");
  return kernel(
      name, params, grid(ceil_div(G, hpt), Hkv, Bd), threads(static_cast<int>(c.at("threads"))),
      [&](Var rx, Var hk, Var b) {
        Var len = let("len", lens_in ? Expr(lens(b)) : Expr(L));
        Tile Qs = alloc_shared({bm, D}, dt), Ks = alloc_shared({bn, D}, dt);
        Tile Vs = alloc_shared({bn, D}, dt);
        Tile s = alloc_fragment({bm, bn}, f32), pr = alloc_fragment({bm, bn}, dt);
        Tile o = alloc_fragment({bm, D}, f32);
        Tile m = alloc_fragment({bm}, f32), m_prev = alloc_fragment({bm}, f32);
        Tile m_scaled = alloc_fragment({bm}, f32), l = alloc_fragment({bm}, f32);
        Tile row_sum = alloc_fragment({bm}, f32), corr = alloc_fragment({bm}, f32);
        // The tile takes hpt whole heads of the group: row i is head rx hpt + i / Sq of the
        // group, token i % Sq. Rows past the tile's heads (or past the group) repeat its last
        // row, whose results are never stored, so every load stays inside q.
        auto row = [&](const Expr& i) { return min(i, rows - 1); };
        auto head = [&](const Expr& i) { return min(rx * hpt + row(i) / Sq, G - 1); };
        parallel({bm, D}, [&](Var i, Var d) { Qs(i, d) = Q(b, hk * G + head(i), row(i) % Sq, d); });
        clear(o);
        clear(l);
        fill(m, -infinity());
        // Token t sees keys j < len - Sq + t + 1: at most len, so ceil(len / bn) steps.
        pipelined(ceildiv(len, bn), stages, [&](Var kb) {
          if (pg) {
            Expr page = table(b, kb);
            copy(K.tile(page, hk, 0, 0), Ks);
            copy(V.tile(page, hk, 0, 0), Vs);
          } else {
            copy(K.tile(b, hk, kb * bn, 0), Ks);
            copy(V.tile(b, hk, kb * bn, 0), Vs);
          }
          gemm(Qs, Ks, s, {.trans_b = true, .clear = true});
          // Token 0 sees the fewest keys: a step wholly below its limit needs no mask.
          if_then(kb * bn + bn > len - Sq + 1, [&] {
            parallel({bm, bn}, [&](Var i, Var j) {
              Expr ok = kb * bn + j < len - Sq + row(i) % Sq + 1;
              s(i, j) = select(ok, s(i, j), -infinity());
            });
          });
          copy(m, m_prev);
          reduce_max(s, m, 1, /*clear=*/false);
          // A row that has seen no visible key keeps m = -inf; m_scaled = 0 keeps its
          // terms exp2(-inf) = 0 instead of NaN (attention's rule).
          parallel({bm}, [&](Var i) {
            m_scaled(i) = select(m(i) == -infinity(), 0.0, m(i) * qk_scale);
            corr(i) = exp2(m_prev(i) * qk_scale - m_scaled(i));
          });
          parallel({bm, bn},
                   [&](Var i, Var j) { s(i, j) = exp2(s(i, j) * qk_scale - m_scaled(i)); });
          reduce_sum(s, row_sum, 1);
          parallel({bm}, [&](Var i) { l(i) = l(i) * corr(i) + row_sum(i); });
          parallel({bm, D}, [&](Var i, Var d) { o(i, d) = o(i, d) * corr(i); });
          copy(s, pr);
          gemm(pr, Vs, o);
        });
        // An empty sequence (or a token that sees no key) has l = 0: its output is 0.
        parallel({bm, D}, [&](Var i, Var d) {
          if_then(i < rows && rx * hpt + i / Sq < G, [&] {
            O(b, hk * G + rx * hpt + i / Sq, i % Sq, d) = select(l(i) > 0, o(i, d) / l(i), 0.0);
          });
        });
      });
}

std::vector<ArgSpec> arg_specs(const Problem& p) {
  const int64_t B = p.at("B"), H = p.at("H"), Hkv = p.at("Hkv"), Sq = p.at("Sq"), D = p.at("D");
  std::vector<ArgSpec> a = {{p.dtype, {B, H, Sq, D}}};
  if (paged(p)) {
    const std::vector<int64_t> cache = {num_pages(p), Hkv, p.at("block"), D};
    a.push_back({p.dtype, cache});
    a.push_back({p.dtype, cache});
    a.push_back({DType::i32, {B, pages_per_seq(p)}});
  } else {
    a.push_back({p.dtype, {B, Hkv, p.at("L"), D}});
    a.push_back({p.dtype, {B, Hkv, p.at("L"), D}});
  }
  if (has_lens(p)) a.push_back({DType::i32, {B}});
  a.push_back({p.dtype, {B, H, Sq, D}});
  return a;
}

std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) {
  std::vector<HostTensor> a;
  for (const ArgSpec& s : arg_specs(p))
    a.emplace_back(s.dtype, s.shape);
  for (int i = 0; i < 3; ++i)
    a[i].fill_random(seed * 7 + i + 1);
  if (paged(p)) {
    // Distinct pages in a seeded random order: sequence b's pages are scattered over the
    // cache as vLLM's allocator leaves them after some churn.
    std::vector<int64_t> perm(static_cast<size_t>(num_pages(p)));
    for (size_t i = 0; i < perm.size(); ++i)
      perm[i] = static_cast<int64_t>(i);
    std::mt19937_64 rng(seed * 7 + 4);
    for (size_t i = perm.size(); i > 1; --i) // Fisher-Yates: the same order on every library
      std::swap(perm[i - 1], perm[rng() % i]);
    // A cache with spare pages (pages=) leaves the last ones of the shuffle unused.
    for (int64_t i = 0; i < a[3].numel(); ++i)
      a[3].set(i, static_cast<double>(perm[static_cast<size_t>(i)]));
  }
  if (has_lens(p)) {
    std::vector<int64_t> L = lengths(p);
    for (size_t b = 0; b < L.size(); ++b)
      a[lens_index(p)].set(static_cast<int64_t>(b), static_cast<double>(L[b]));
  }
  a[out_index(p)].poison();
  return a;
}

std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& a, int64_t b,
                              int64_t h0, int64_t nh, int64_t t0, int64_t nt, int64_t d0,
                              int64_t nd) {
  const int64_t H = p.at("H"), Hkv = p.at("Hkv"), Sq = p.at("Sq"), D = p.at("D"), L = p.at("L");
  const int64_t G = H / Hkv;
  const int64_t len = has_lens(p) ? static_cast<int64_t>(a[lens_index(p)].get(b)) : L;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> out;
  out.reserve(static_cast<size_t>(nh * nt * nd));
  std::vector<double> k(static_cast<size_t>(len * D)), v(k.size()), w(static_cast<size_t>(len));
  int64_t loaded = -1;
  for (int64_t h = h0; h < h0 + nh; ++h) {
    const int64_t hk = h / G;
    if (hk != loaded) { // this KV head's keys and values, contiguous, as doubles
      for (int64_t j = 0; j < len; ++j) {
        int64_t base;
        if (paged(p)) {
          const int64_t blk = p.at("block");
          const int64_t page = static_cast<int64_t>(a[3].get(b * pages_per_seq(p) + j / blk));
          base = ((page * Hkv + hk) * blk + j % blk) * D;
        } else {
          base = ((b * Hkv + hk) * L + j) * D;
        }
        for (int64_t e = 0; e < D; ++e) {
          k[j * D + e] = a[1].get(base + e);
          v[j * D + e] = a[2].get(base + e);
        }
      }
      loaded = hk;
    }
    for (int64_t t = t0; t < t0 + nt; ++t) {
      const int64_t visible = std::clamp<int64_t>(len - Sq + t + 1, 0, len);
      const int64_t qb = ((b * H + h) * Sq + t) * D;
      std::vector<double> q(static_cast<size_t>(D));
      for (int64_t e = 0; e < D; ++e)
        q[e] = a[0].get(qb + e);
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < visible; ++j) {
        double s = 0;
        for (int64_t e = 0; e < D; ++e)
          s += q[e] * k[j * D + e];
        w[j] = s * scale;
        mx = std::max(mx, w[j]);
      }
      for (int64_t j = 0; j < visible; ++j)
        sum += (w[j] = std::exp(w[j] - mx));
      for (int64_t d = d0; d < d0 + nd; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < visible; ++j)
          acc += w[j] * v[j * D + d];
        out.push_back(visible > 0 ? acc / sum : 0.0);
      }
    }
  }
  return out;
}

} // namespace tp::ops::decode_attention
