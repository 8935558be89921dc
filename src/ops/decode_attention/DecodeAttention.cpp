// decode_attention's kernel, parsing, inputs and fp64 reference (see DecodeAttention.h).
//
// The kernel: one block per (tile of query heads, KV head, sequence). Its rows are the query
// heads sharing the KV head (as many whole heads as bm rows hold: all G = H / Hkv of them at
// Llama-3's 4 x Sq <= 64) times the Sq query tokens, row i = head i / Sq, token i % Sq, padded
// to bm; so grouped heads read each K and V tile once for all of them. It walks its sequence's
// whole cache (bn keys, or one page through the block table, a step) with lesson 13's online
// softmax in the log2 domain (AttendKeys.h, shared with the split kernel) and writes the
// normalised output. So at small batch the grid is only B x Hkv blocks (B=1: 8 on
// Llama-3-8B); SplitKv.h splits the keys over more blocks in two kernels, which
// Operator::build, returning one kernel, does not run yet.
#include "ops/decode_attention/DecodeAttention.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "ops/ParseHelpers.h"
#include "ops/decode_attention/AttendKeys.h"
#include "tilepilot/tilepilot.h"

namespace tp::ops::decode_attention {

namespace {

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
  const int64_t bn = c.at("bn"), hpt = heads_per_tile(p, c), rows = hpt * Sq;
  Inputs in = make_inputs(p, c);
  Tensor O("out", {in.B, in.H, Sq, D}, p.dtype);
  std::vector<Tensor> params = in.params;
  params.push_back(O);
  return kernel("decode_attention" + kernel_tag(p, c), params, grid(ceil_div(G, hpt), in.Hkv, in.B),
                threads(static_cast<int>(c.at("threads"))), [&](Var rx, Var hk, Var b) {
                  Var len = let("len", seq_len(p, in, b));
                  Partial r = attend_keys(p, c, in, rx, hk, b, len, 0, ceildiv(len, bn));
                  // An empty sequence (or a token that sees no key) has l = 0: its output is 0.
                  parallel({c.at("bm"), D}, [&](Var i, Var d) {
                    if_then(i < rows && rx * hpt + i / Sq < G, [&] {
                      O(b, hk * G + rx * hpt + i / Sq, i % Sq, d) =
                          select(r.l(i) > 0, r.o(i, d) / r.l(i), 0.0);
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
