// grouped_gemm's kernel, parsing, inputs and fp64 reference (see GroupedGemm.h).
//
// The kernel: one block per (bn columns, bm-row tile of one expert). The tile list is expert
// by expert, ceil(count_e / bm) tiles each, as lesson 10's host-built list, but each block
// derives its own entry from offs: with cum_e the tiles of experts 0..e, block row t belongs
// to expert g = #{e : cum_e <= t} and starts at row offs[g - 1] + (t - cum_{g-1}) bm. E is
// compiled in, so that scan is a chain of scalar lets over offs, a few per expert (no loop,
// no tile): the
// kernel's inputs do not depend on the config, and lets that read only a read-only tensor are
// what a warp-specialized TMA producer may evaluate for its coordinates, so the sm_90a kernel
// stays warp-specialized. The grid's rows are a bound on the tiles (max_tiles); blocks past
// the list run no K step and store nothing, and rows past the expert's end are not stored.
// Partial tiles waste at most E - 1 tiles' MMA work, as a host-built list does.
#include "ops/grouped_gemm/GroupedGemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>

#include "ops/ParseHelpers.h"
#include "tilepilot/tilepilot.h"

namespace tp::ops::grouped_gemm {

namespace {

const char* kOp = "grouped_gemm";

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

std::vector<int64_t> parse_counts(const std::string& text, int64_t E, int64_t R) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ':');) {
    int64_t x = -1;
    try {
      size_t pos;
      x = std::stoll(item, &pos);
      if (pos != item.size()) x = -1;
    } catch (const std::exception&) {}
    if (x < 0 || x > R)
      user_error() << kOp << ": counts entry '" << item << "' must be an integer in [0, R=" << R
                   << "]";
    out.push_back(x);
  }
  if (static_cast<int64_t>(out.size()) != E)
    user_error() << kOp << ": counts has " << out.size() << " entries but E=" << E
                 << "; give one row count per expert, colon-separated (e.g. counts=37:0:64:5)";
  const int64_t sum = std::accumulate(out.begin(), out.end(), int64_t{0});
  if (sum != R)
    user_error() << kOp << ": counts sum to " << sum << " but R=" << R
                 << "; R is the total of the experts' rows";
  return out;
}

/// A ragged routing: about a quarter of the experts get no row, the others shares of R drawn
/// from a cubed uniform (a few hot experts, a long cold tail), rounded by largest remainder.
/// Its own generator (not std distributions) gives the same counts on every library.
std::vector<int64_t> ragged_counts(int64_t E, int64_t R) {
  if (E == 1) return {R};
  uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t(E) * 1000003u + uint64_t(R));
  auto next = [&] { // splitmix64
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::vector<double> w(E);
  for (double& x : w) {
    double u = double(next() >> 11) * 0x1.0p-53;
    x = 0.02 + u * u * u;
  }
  const int64_t empty = std::max<int64_t>(1, E / 4);
  for (int64_t i = 0; i < empty; ++i)
    w[next() % uint64_t(E)] = 0;
  if (std::all_of(w.begin(), w.end(), [](double x) { return x == 0; })) w[0] = 1;
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<int64_t> c(E);
  std::vector<std::pair<double, int64_t>> rest;
  int64_t given = 0;
  for (int64_t e = 0; e < E; ++e) {
    const double share = double(R) * w[e] / total;
    c[e] = static_cast<int64_t>(share);
    given += c[e];
    if (w[e] > 0) rest.push_back({share - double(c[e]), e});
  }
  std::stable_sort(rest.begin(), rest.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < R; ++i, ++given)
    ++c[rest[i % rest.size()].second];
  return c;
}

/// B: the experts that get rows uniform in [-1, 1), those that get none NaN, so that a kernel
/// reading an empty expert's weights fails. The weights are most of a problem's bytes (Mixtral:
/// 470M per projection), so bf16 is written as bits straight from splitmix64 (a 24-bit
/// uniform, truncated to bf16: still uniform on bf16's grid) instead of fill_random's
/// per-element rounding: the CPU pilot's run time is mostly this fill.
void fill_weights(HostTensor& b, const std::vector<int64_t>& n, uint64_t seed) {
  const int64_t per_expert = b.numel() / static_cast<int64_t>(n.size());
  if (b.dtype() != DType::bf16) {
    b.fill_random(seed);
    for (size_t e = 0; e < n.size(); ++e)
      if (n[e] == 0)
        for (int64_t i = 0; i < per_expert; ++i)
          b.set(static_cast<int64_t>(e) * per_expert + i, NAN);
    return;
  }
  uint16_t* bits = static_cast<uint16_t*>(b.data());
  for (size_t e = 0; e < n.size(); ++e) {
    uint16_t* w = bits + static_cast<int64_t>(e) * per_expert;
    if (n[e] == 0) {
      std::fill(w, w + per_expert, uint16_t{0x7fc0}); // bf16 quiet NaN
      continue;
    }
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + e;
    for (int64_t i = 0; i < per_expert; ++i) {
      uint64_t z = (s += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      const float f = static_cast<float>(z >> 40) * 0x1.0p-23f - 1.0f; // [-1, 1), exact
      uint32_t u;
      std::memcpy(&u, &f, 4);
      w[i] = static_cast<uint16_t>(u >> 16);
    }
  }
}

} // namespace

Problem parse(const std::map<std::string, std::string>& kv, DType dtype) {
  reject_unknown(kv, {"E", "R", "N", "K", "layout", "counts"}, kOp);
  const std::string ex = "E=8,R=8192,N=14336,K=4096";
  Problem p;
  p.op = kOp;
  p.dtype = dtype;
  for (const char* k : {"E", "R", "N", "K"})
    p.shape[k] = require_positive(kv, k, kOp, ex);
  if (p.shape["E"] > kMaxExperts)
    user_error() << kOp << ": E=" << p.shape["E"] << " is more than " << kMaxExperts
                 << " experts; the kernel unrolls its tile scan over E";
  const std::string layout = kv.count("layout") ? kv.at("layout") : "nt";
  if (layout != "nt" && layout != "nn")
    user_error() << kOp << ": layout=" << layout
                 << " is not supported; use nt (B [E, N, K], torch Linear weights) or nn "
                    "(B [E, K, N])";
  p.options["layout"] = layout;
  if (dtype != DType::bf16 && dtype != DType::f16)
    user_error() << kOp << ": dtype " << dtype_name(dtype) << " is not supported; use bf16 or f16";
  if (kv.count("counts")) {
    const std::string& c = kv.at("counts");
    if (c != "runtime") parse_counts(c, p.shape["E"], p.shape["R"]);
    p.options["counts"] = c;
  }
  return p;
}

std::vector<int64_t> counts(const Problem& p) {
  const int64_t E = p.at("E"), R = p.at("R");
  auto it = p.options.find("counts");
  if (it == p.options.end() || it->second == "runtime") return ragged_counts(E, R);
  return parse_counts(it->second, E, R);
}

Config default_config(const Problem& p, const std::string& arch) {
  if (arch == "cpu") return {{"bm", 32}, {"bn", 64}, {"bk", 32}, {"stages", 2}, {"threads", 128}};
  // Priors, not yet measured. Experts with many rows (a prefill: Mixtral's ~R/4 each) take
  // gemm's large sm_90a tile; few rows per expert (decode, DeepSeek's 64 small experts) take
  // one wgmma M of 64 rows, so partial tiles waste little, and more column tiles to spread
  // the expert weights' reads over the SMs.
  const bool many_rows = p.at("R") / p.at("E") >= 128;
  if (arch == "sm_90a")
    return many_rows ? Config{{"bm", 128}, {"bn", 256}, {"bk", 64}, {"stages", 4}, {"threads", 256}}
                     : Config{{"bm", 64}, {"bn", 128}, {"bk", 64}, {"stages", 4}, {"threads", 128}};
  return many_rows ? Config{{"bm", 128}, {"bn", 128}, {"bk", 32}, {"stages", 3}, {"threads", 128}}
                   : Config{{"bm", 64}, {"bn", 128}, {"bk", 32}, {"stages", 3}, {"threads", 128}};
}

void validate(const Problem&, const Config&) {
  // Each knob's domain is its Knob's (check_config); no rule between knobs beyond them.
}

int64_t max_tiles(int64_t E, int64_t R, int64_t bm) {
  // Each expert's last tile may be partial (E - 1 more than R / bm), and no tile is empty.
  return std::min(R, ceil_div(R, bm) + E - 1);
}

Kernel build(const Problem& p, const Config& c) {
  validate(p, c);
  const int64_t E = p.at("E"), bm = c.at("bm"), bn = c.at("bn"), bk = c.at("bk");
  const int stages = static_cast<int>(c.at("stages"));
  const bool nt = p.options.at("layout") == "nt";
  const DType dt = p.dtype;
  Dim R("R"), N("N"), K("K");
  Tensor A("A", {R, K}, dt), C("C", {R, N}, dt), offs("offs", {E}, i32);
  Tensor B("B", nt ? std::vector<Expr>{E, N, K} : std::vector<Expr>{E, K, N}, dt);
  const std::string name = "grouped_gemm_" + p.options.at("layout") + "_e" + std::to_string(E);
  return kernel(name, {A, B, offs, C}, grid(ceildiv(N, bn), min(R, ceildiv(R, bm) + (E - 1))),
                threads(static_cast<int>(c.at("threads"))), [&](Var bx, Var t) {
                  // One pass over the experts, a few running lets each (so only those stay live,
                  // also in a producer warp's small register budget): end = offs[e] clipped to R
                  // (bad offsets never address past A or C); cum = the tiles of experts 0..e; for
                  // the experts wholly before block row t (cum <= t, as cum only grows): g counts
                  // them, start is the last one's end (expert g's first row) and before its cum
                  // (the tiles ahead of expert g).
                  Expr end = 0, cum = 0, g = 0, start = 0, before = 0;
                  for (int64_t e = 0; e < E; ++e) {
                    const std::string n = std::to_string(e);
                    Expr prev = end;
                    end = let("end" + n, min(offs(e), R));
                    cum = let("cum" + n, cum + ceildiv(max(end - prev, 0), bm));
                    Var done = let("done" + n, select(cum <= t, 1, 0));
                    g = let("g" + n, g + done);
                    start = let("start" + n, select(done > 0, end, start));
                    before = let("before" + n, select(done > 0, cum, before));
                  }
                  Var valid = let("valid", select(t < cum, 1, 0));
                  // Past the list g is E: clamp it so that every address stays inside B and offs.
                  Var ge = let("expert", min(g, E - 1));
                  Var row0 = let("row0", start + (t - before) * bm);
                  Var row_end = let("row_end", select(valid > 0, min(offs(ge), R), 0));
                  Tile As = alloc_shared({bm, bk}, dt);
                  Tile Bs = nt ? alloc_shared({bn, bk}, dt) : alloc_shared({bk, bn}, dt);
                  Tile acc = alloc_fragment({bm, bn}, f32);
                  clear(acc);
                  // A block past the list runs no step; its (zero) tile is not stored.
                  pipelined(select(valid > 0, ceildiv(K, bk), 0), stages, [&](Var k) {
                    // Rows past the expert's end are computed but not stored.
                    copy(A.tile(row0, k * bk), As);
                    copy(nt ? B.tile(ge, bx * bn, k * bk) : B.tile(ge, k * bk, bx * bn), Bs);
                    gemm(As, Bs, acc, {.trans_b = nt});
                  });
                  // An element-wise guarded store: a whole-tile copy would overwrite the next
                  // expert's rows (lesson 10).
                  parallel({bm, bn}, [&](Var i, Var j) {
                    Expr row = row0 + i, col = bx * bn + j;
                    if_then(row < row_end && col < N, [&] { C(row, col) = acc(i, j); });
                  });
                });
}

std::vector<ArgSpec> arg_specs(const Problem& p) {
  const int64_t E = p.at("E"), R = p.at("R"), N = p.at("N"), K = p.at("K");
  const bool nt = p.options.at("layout") == "nt";
  return {{p.dtype, {R, K}},
          {p.dtype, nt ? std::vector<int64_t>{E, N, K} : std::vector<int64_t>{E, K, N}},
          {DType::i32, {E}},
          {p.dtype, {R, N}}};
}

std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) {
  std::vector<HostTensor> a;
  for (const ArgSpec& s : arg_specs(p))
    a.emplace_back(s.dtype, s.shape);
  a[0].fill_random(seed * 5 + 1);
  const std::vector<int64_t> n = counts(p);
  fill_weights(a[1], n, seed * 5 + 2);
  int64_t end = 0;
  for (size_t e = 0; e < n.size(); ++e)
    a[2].set(static_cast<int64_t>(e), static_cast<double>(end += n[e]));
  a[3].poison();
  return a;
}

std::vector<RowTile> row_tiles(const std::vector<int64_t>& counts, int64_t bm) {
  std::vector<RowTile> out;
  int64_t begin = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    const int64_t end = begin + counts[e];
    for (int64_t r = begin; r < end; r += bm)
      out.push_back({static_cast<int64_t>(e), r, end});
    begin = end;
  }
  return out;
}

std::vector<int64_t> offsets_of(const HostTensor& offs, int64_t R) {
  std::vector<int64_t> out;
  int64_t prev = 0;
  for (int64_t e = 0; e < offs.numel(); ++e) {
    const int64_t x = static_cast<int64_t>(offs.get(e));
    if (x < prev || x > R)
      user_error() << kOp << ": offs[" << e << "]=" << x << " must lie in [offs[" << e - 1
                   << "]=" << prev << ", R=" << R
                   << "]: offs are the experts' cumulative row ends, non-decreasing";
    out.push_back(prev = x);
  }
  return out;
}

std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& a, int64_t r0,
                              int64_t nr, int64_t c0, int64_t nc) {
  const int64_t N = p.at("N"), K = p.at("K");
  const bool nt = p.options.at("layout") == "nt";
  const std::vector<int64_t> ends = offsets_of(a[2], p.at("R"));
  std::vector<double> out(static_cast<size_t>(nr * nc), std::numeric_limits<double>::quiet_NaN());
  std::vector<double> bt(static_cast<size_t>(nc * K)), row(static_cast<size_t>(K));
  int64_t loaded = -1;
  for (int64_t r = r0; r < r0 + nr; ++r) {
    const int64_t e = std::upper_bound(ends.begin(), ends.end(), r) - ends.begin();
    if (e == static_cast<int64_t>(ends.size())) continue; // no expert owns row r
    if (e != loaded) { // expert e's columns [c0, c0 + nc) of op(B), as rows of K
      for (int64_t n = 0; n < nc; ++n)
        for (int64_t k = 0; k < K; ++k)
          bt[n * K + k] = a[1].get(nt ? (e * N + c0 + n) * K + k : (e * K + k) * N + c0 + n);
      loaded = e;
    }
    for (int64_t k = 0; k < K; ++k)
      row[k] = a[0].get(r * K + k);
    for (int64_t n = 0; n < nc; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += row[k] * bt[n * K + k];
      out[(r - r0) * nc + n] = s;
    }
  }
  return out;
}

} // namespace tp::ops::grouped_gemm
