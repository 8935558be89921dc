// The attention operator: its tile-language kernel (online softmax in the log2 domain), fp64
// reference and problem handling.
#include "ops/attention/AttentionOp.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "ops/ParseHelpers.h"
#include "tilepilot/tilepilot.h"

namespace tp::ops {

namespace {
constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;
} // namespace

Kernel attention_kernel(const AttentionVariant& v, const Config& c) {
  const int64_t bm = c.at("bm"), bn = c.at("bn"), D = v.D;
  const int stages = static_cast<int>(c.at("stages"));
  const double scale = v.scale > 0 ? v.scale : 1.0 / std::sqrt(static_cast<double>(D));
  const DType dt = v.dtype;
  Dim Bd("B"), H("H"), Hkv("Hkv"), S("S"), Skv("Skv");
  // Strided: views are read and written in place (TMA takes their strides; the plain variant
  // and the output's stores index them).
  Tensor Q("Q", {Bd, H, S, D}, dt, strided), K("K", {Bd, Hkv, Skv, D}, dt, strided),
      V("V", {Bd, Hkv, Skv, D}, dt, strided);
  Tensor O("O", {Bd, H, S, D}, dt, strided);
  Tensor LSE("LSE", {Bd, H, S}, f32), lens("lens", {Bd}, i32);
  std::vector<Tensor> params = {Q, K, V, O};
  if (v.lse) params.push_back(LSE);
  if (v.lens) params.push_back(lens);
  std::string name = "attention_d" + std::to_string(D) + (v.causal ? "_causal" : "") +
                     (v.lens ? "_lens" : "") + (v.lse ? "_lse" : "");

  return kernel(
      name, params, grid(ceildiv(S, bm), H, Bd), threads(static_cast<int>(c.at("threads"))),
      [&](Var bx_launch, Var h, Var b) {
        // About one block per SM taking (query block, head, batch) tiles in launch order; the
        // next tile's Q and first K/V land while this one's output is written.
        if (c.count("persistent") && c.at("persistent") == 1) annotate("persistent", "1");
        // The output leaves through shared memory and TMA where the compiler can
        // (docs/schedules.md); tma_stores=0 keeps the stores from registers, to compare.
        if (c.count("tma_stores") && c.at("tma_stores") == 0) annotate("tma_stores", "0");
        Tile Qs = alloc_shared({bm, D}, dt);
        Tile Ks = alloc_shared({bn, D}, dt);
        Tile Vs = alloc_shared({bn, D}, dt);
        Tile s = alloc_fragment({bm, bn}, f32); // raw scores, then probabilities
        Tile p = alloc_fragment({bm, bn}, dt);  // probabilities in the input dtype for P.V
        Tile o = alloc_fragment({bm, D}, f32);  // unnormalised output
        Tile m = alloc_fragment({bm}, f32);     // running row max of the raw scores
        Tile m_prev = alloc_fragment({bm}, f32);
        Tile m_scaled = alloc_fragment({bm}, f32); // m * scale * log2(e); 0 while m is -inf
        Tile l = alloc_fragment({bm}, f32);        // running row sum
        Tile row_sum = alloc_fragment({bm}, f32);
        Tile corr = alloc_fragment({bm}, f32); // rescale factor of the previous partials

        // Causal: later query blocks see more keys. Launch them first so the short blocks fill
        // the last wave instead of the long ones.
        Expr q_blocks = ceildiv(S, bm);
        Expr bx = v.causal ? q_blocks - 1 - Expr(bx_launch) : Expr(bx_launch);
        Expr hk = h / (H / Hkv);
        Expr L = v.lens ? Expr(lens(b)) : Expr(Skv);
        Expr diag = L - S; // causal: key j is visible from query i when j <= i + diag
        Expr n_blocks = ceildiv(L, bn);
        if (v.causal) {
          Expr last_visible = min(bx * bm + bm, S) + diag; // one past the last visible key
          n_blocks = min(n_blocks, ceildiv(max(last_visible, 0), bn));
        }

        copy(Q.tile(b, h, bx * bm, 0), Qs);
        clear(o);
        clear(l);
        fill(m, -infinity());
        const double qk_scale = scale * kLog2e;
        Schedule schedule{.stages = stages};
        // P.V of block j-1 runs while block j's softmax is computed.
        schedule.defer_last_gemm = c.count("overlap") && c.at("overlap") == 1;
        // Consumer warpgroups take turns at the tensor cores: one's softmax runs during
        // another's P.V and next Q.K^T.
        schedule.pingpong = c.count("pingpong") && c.at("pingpong") == 1;
        pipelined(n_blocks, schedule, [&](Var kb) {
          copy(K.tile(b, hk, kb * bn, 0), Ks);
          copy(V.tile(b, hk, kb * bn, 0), Vs);
          gemm(Qs, Ks, s, {.trans_b = true, .clear = true});
          // Only blocks at the end of the keys or across the causal diagonal need the mask; the
          // test is uniform per block, so the others skip the per-element comparisons.
          Expr masked = kb * bn + bn > L;
          if (v.causal) masked = masked || kb * bn + bn - 1 > bx * bm + diag;
          if_then(masked, [&] {
            parallel({bm, bn}, [&](Var i, Var j) {
              Expr key = kb * bn + j;
              Expr ok = key < L;
              if (v.causal) ok = ok && key <= bx * bm + i + diag;
              s(i, j) = select(ok, s(i, j), -infinity());
            });
          });
          copy(m, m_prev);
          reduce_max(s, m, 1, /*clear=*/false);
          // The scale is folded into one multiply-add per score: exp2(s * c - m * c). A row that
          // has seen no valid key keeps m = -inf; m_scaled = 0 then makes its terms exp2(-inf) = 0
          // (and corr 0, which leaves its zero partials zero) instead of NaN.
          parallel({bm}, [&](Var i) {
            m_scaled(i) = select(m(i) == -infinity(), 0.0, m(i) * qk_scale);
            corr(i) = exp2(m_prev(i) * qk_scale - m_scaled(i));
          });
          parallel({bm, bn},
                   [&](Var i, Var j) { s(i, j) = exp2(s(i, j) * qk_scale - m_scaled(i)); });
          reduce_sum(s, row_sum, 1);
          parallel({bm}, [&](Var i) { l(i) = l(i) * corr(i) + row_sum(i); });
          parallel({bm, D}, [&](Var i, Var d) { o(i, d) = o(i, d) * corr(i); });
          copy(s, p);
          gemm(p, Vs, o);
        });
        parallel({bm, D}, [&](Var i, Var d) { o(i, d) = select(l(i) > 0, o(i, d) / l(i), 0.0); });
        copy(o, O.tile(b, h, bx * bm, 0));
        if (v.lse) {
          parallel({bm}, [&](Var i) {
            row_sum(i) = select(l(i) > 0, (m(i) * qk_scale + log2(l(i))) * kLn2, -infinity());
          });
          copy(row_sum, LSE.tile(b, h, bx * bm));
        }
      });
}

std::string AttentionOp::summary() const {
  return "O = softmax(scale Q K^T + mask) V, [B, heads, seq, D]; causal, grouped heads, "
         "padded batches, optional LSE";
}

std::vector<std::pair<std::string, std::string>> AttentionOp::shape_keys() const {
  return {{"B", "batch"},
          {"H", "query heads"},
          {"S", "query length"},
          {"D", "head dim (64, 128, 256; any multiple of 16 up to 256 on the interpreter)"},
          {"Skv", "key/value length (default S)"},
          {"Hkv", "key/value heads, dividing H (default H)"},
          {"causal", "0 or 1: bottom-right aligned causal mask (default 0)"},
          {"lse", "0 or 1: also output the log-sum-exp [B, H, S] (default 0)"},
          {"scale", "softmax scale (default 1/sqrt(D))"},
          {"lens", "per-batch key lengths, colon-separated (e.g. lens=5:77:3), each <= Skv"}};
}

std::vector<Knob> AttentionOp::knobs(const std::string& arch) const {
  const bool hopper = arch == "sm_90a";
  // The interpreter ("cpu") takes every config some GPU arch takes.
  const bool tma = arch != "sm_80";
  return {
      {"bm",
       {64, 128, 192},
       "query rows per block (a multiple of 16; 192: three consumer "
       "warpgroups)",
       16,
       512,
       0,
       16},
      // On sm_90a the first gemm's accumulator (bm x bn) is one wgmma wide, at most 256;
      // wider blocks run both gemms as mma on the other targets.
      {"bn", {32, 64, 128}, "keys per iteration (a multiple of 16)", 16, hopper ? 256 : 512, 0, 16},
      {"stages", {1, 2, 3}, "pipeline depth", 1, 4},
      {"threads", {128, 256, 384}, "threads per block (a multiple of 32)", 32, 1024, 0, 32},
      // The persistent schedule exists for warp-specialized (TMA) kernels only.
      {"persistent", hopper ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0},
       "1: one block per SM loops over tiles (sm_90a TMA)", 0, tma ? 1 : 0},
      // Ping-pong turns were slower than free-running warpgroups on 7 of 8 shapes (6-14 %,
      // H200 device run s3, 2026-11-30), and with overlap=1 too at all 8 shapes timed (5-16 %,
      // H100 call s1, 2026-12-07); the tuner leaves them out unless a --space names them.
      {"pingpong",
       {0},
       "1: consumer warpgroups alternate gemms and the row statistics (sm_90a)",
       0,
       tma ? 1 : 0},
      // The deferred second gemm (overlap=1) is the sm_90a default; it needs warp-specialized
      // TMA kernels.
      {"overlap", hopper ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0},
       "1: P.V of block j-1 runs during block j's softmax (sm_90a)", 0, tma ? 1 : 0},
      // Not searched: the compiler takes TMA stores wherever they fit; 0 is for side-by-side
      // runs against the register stores.
      {"tma_stores",
       {1},
       "0: the output is stored from registers; 1 (default): through shared memory and TMA "
       "where it fits (sm_90a)",
       0,
       1,
       1}};
}

Problem AttentionOp::parse(const std::map<std::string, std::string>& kv, DType dtype) const {
  reject_unknown(kv, {"B", "H", "S", "D", "Skv", "Hkv", "causal", "lse", "lens", "scale"},
                 "attention");
  const std::string ex = "B=2,H=8,S=1024,D=128,causal=1";
  Problem p;
  p.op = "attention";
  p.dtype = dtype;
  for (const char* k : {"B", "H", "S", "D"})
    p.shape[k] = require_positive(kv, k, "attention", ex);
  p.shape["Skv"] = optional_int(kv, "Skv", p.shape["S"], "attention");
  p.shape["Hkv"] = optional_int(kv, "Hkv", p.shape["H"], "attention");
  p.shape["causal"] = optional_int(kv, "causal", 0, "attention", true);
  p.shape["lse"] = optional_int(kv, "lse", 0, "attention", true);
  if (p.shape["causal"] > 1 || p.shape["lse"] > 1)
    user_error() << "attention: causal and lse take 0 or 1";
  if (p.shape["H"] % p.shape["Hkv"])
    user_error() << "attention: Hkv=" << p.shape["Hkv"] << " does not divide H=" << p.shape["H"]
                 << "; grouped heads need H to be a multiple of Hkv";
  int64_t D = p.shape["D"];
  if (D % 16 || D > 256)
    user_error() << "attention: D=" << D << " is not supported; use 64, 128 or 256";
  if (dtype != DType::bf16 && dtype != DType::f16)
    user_error() << "attention: dtype " << dtype_name(dtype)
                 << " is not supported; use bf16 or f16";
  if (kv.count("lens")) {
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
      if (x < 0 || x > p.shape["Skv"])
        user_error() << "attention: lens entry '" << item
                     << "' must be an integer in [0, Skv=" << p.shape["Skv"] << "]";
      ++n;
    }
    if (n != p.shape["B"])
      user_error() << "attention: lens has " << n << " entries but B=" << p.shape["B"]
                   << "; give one key length per batch, colon-separated";
    p.options["lens"] = kv.at("lens");
  }
  if (kv.count("scale")) {
    double x = -1;
    try {
      size_t pos;
      x = std::stod(kv.at("scale"), &pos);
      if (pos != kv.at("scale").size()) x = -1;
    } catch (const std::exception&) {}
    if (!(x > 0) || !std::isfinite(x))
      user_error() << "attention: scale=" << kv.at("scale")
                   << " must be a positive finite number (default 1/sqrt(D))";
    if (x != 1.0 / std::sqrt(static_cast<double>(D))) p.options["scale"] = kv.at("scale");
  }
  return p;
}

Config AttentionOp::default_config(const Problem& p, const std::string& arch) const {
  int64_t D = p.at("D");
  // sm_90a, D <= 128: persistent blocks (one per SM, tiles from a counter) whose loop defers
  // P.V by one block so it runs on the tensor cores during the next block's softmax. Holding
  // block k-1's V while block k lands takes three stages. Side by side with cuDNN on the H200
  // (device run s9, 2026-11-30) it was faster than the previous defaults on all 24 bench
  // shapes (D=64 and 128, S=512..16k, both masks), 2-17 %; at D=128 S=2048 without a mask it
  // ties the 192-row block (0.4989 vs 0.4923 ms), which it replaces to keep one rule.
  // D=256 (K/V tiles of 64 keys) stays per-tile with two stages: three do not fit in shared
  // memory with Q.
  const bool sm90 = arch == "sm_90a";
  // D = 64: 192 query rows a block (three consumer warpgroups). The 128-row block's two
  // gemms are too short to hide its softmax. On an H100 (device run q2, 2026-12-06) the
  // 192-row block ran 3.5-14 % faster without a mask at every S from 512 to 16k, and causal
  // from S = 2048 (1.6 % there, 12 % at 8k); causal at S <= 1024 it lost 9-12 %: its blocks
  // straddle the diagonal more and fill fewer SMs.
  if (sm90 && D == 64 && (p.get("causal", 0) == 0 || p.at("S") >= 2048))
    return {{"bm", 192},      {"bn", 128},       {"stages", 3},
            {"threads", 384}, {"persistent", 1}, {"overlap", 1}};
  if (sm90 && D <= 128)
    return {{"bm", 128},      {"bn", 128},       {"stages", 3},
            {"threads", 256}, {"persistent", 1}, {"overlap", 1}};
  if (sm90) return {{"bm", 128}, {"bn", 64}, {"stages", 2}, {"threads", 256}, {"persistent", 0}};
  if (arch == "sm_80") return {{"bm", 64}, {"bn", 64}, {"stages", 2}, {"threads", 128}};
  return {{"bm", 64}, {"bn", 64}, {"stages", 1}, {"threads", 128}};
}

void AttentionOp::validate(const Problem&, const Config& c) const {
  // Every knob's domain is its Knob's (check_config); the compiler reports a tile that does
  // not fit in its own words. The loop schedule's rules (ir/ScheduleRules.h) are said here in
  // the knobs' words, so a tuner space or a pinned config hears them before building.
  auto on = [&](const char* k) { return c.count(k) && c.at(k) == 1; };
  if (on("overlap") && c.at("stages") < 2)
    user_error() << "attention: overlap=1 needs stages >= 2 (block j-1's V stays while block "
                    "j's lands); use stages=2 or 3, or overlap=0";
  if (on("pingpong") && (c.at("threads") < 256 || c.at("threads") % 128))
    user_error() << "attention: pingpong=1 needs two or more consumer warpgroups; use "
                    "threads=256 or 384 (got threads="
                 << c.at("threads") << ")";
}

AttentionVariant AttentionOp::variant(const Problem& p) {
  AttentionVariant v;
  v.dtype = p.dtype;
  v.D = p.at("D");
  v.causal = p.get("causal", 0) != 0;
  v.lse = p.get("lse", 0) != 0;
  v.lens = p.options.count("lens") > 0;
  if (p.options.count("scale")) v.scale = std::stod(p.options.at("scale"));
  return v;
}

std::vector<int64_t> AttentionOp::key_lengths(const Problem& p) {
  std::vector<int64_t> out;
  if (!p.options.count("lens")) return std::vector<int64_t>(p.at("B"), p.at("Skv"));
  std::stringstream ss(p.options.at("lens"));
  std::string item;
  while (std::getline(ss, item, ':'))
    out.push_back(std::stoll(item));
  return out;
}

Kernel AttentionOp::build(const Problem& p, const Config& c) const {
  validate(p, c);
  return attention_kernel(variant(p), c);
}

std::vector<ArgSpec> AttentionOp::arg_specs(const Problem& p) const {
  int64_t B = p.at("B"), H = p.at("H"), S = p.at("S"), D = p.at("D");
  int64_t Skv = p.at("Skv"), Hkv = p.at("Hkv");
  std::vector<ArgSpec> a = {{p.dtype, {B, H, S, D}},
                            {p.dtype, {B, Hkv, Skv, D}},
                            {p.dtype, {B, Hkv, Skv, D}},
                            {p.dtype, {B, H, S, D}}};
  if (p.get("lse", 0)) a.push_back({DType::f32, {B, H, S}});
  if (p.options.count("lens")) a.push_back({DType::i32, {B}});
  return a;
}

// The operator's own seeds keep recorded repro seeds replaying the same inputs; lens holds the
// problem's lengths, not random values.
std::vector<HostTensor> AttentionOp::make_args(const Problem& p, uint64_t seed) const {
  int64_t B = p.at("B"), H = p.at("H"), S = p.at("S"), D = p.at("D");
  int64_t Skv = p.at("Skv"), Hkv = p.at("Hkv");
  std::vector<HostTensor> a;
  a.emplace_back(p.dtype, std::vector<int64_t>{B, H, S, D});
  a.emplace_back(p.dtype, std::vector<int64_t>{B, Hkv, Skv, D});
  a.emplace_back(p.dtype, std::vector<int64_t>{B, Hkv, Skv, D});
  a.emplace_back(p.dtype, std::vector<int64_t>{B, H, S, D});
  for (int i = 0; i < 3; ++i)
    a[i].fill_random(seed * 5 + i + 1);
  a[3].poison();
  if (p.get("lse", 0)) {
    a.emplace_back(DType::f32, std::vector<int64_t>{B, H, S});
    a.back().poison();
  }
  if (p.options.count("lens")) {
    a.emplace_back(DType::i32, std::vector<int64_t>{B});
    std::vector<int64_t> L = key_lengths(p);
    for (int64_t b = 0; b < B; ++b)
      a.back().set(b, static_cast<double>(L[b]));
  }
  return a;
}

std::vector<int> AttentionOp::outputs(const Problem& p) const {
  if (p.get("lse", 0)) return {3, 4};
  return {3};
}

std::vector<double> AttentionOp::reference(const Problem& p, const std::vector<HostTensor>& a,
                                           const Box& box) const {
  int64_t H = p.at("H"), S = p.at("S"), D = p.at("D"), Skv = p.at("Skv"), Hkv = p.at("Hkv");
  bool causal = p.get("causal", 0) != 0;
  const double scale = p.options.count("scale") ? std::stod(p.options.at("scale"))
                                                : 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<int64_t> L = key_lengths(p);
  bool want_lse = box.tensor == 4;
  int64_t b = box.min[0], h = box.min[1], hk = h / (H / Hkv);
  internal_assert(box.extent[0] == 1 && box.extent[1] == 1) << "reference box spans heads";
  int64_t r0 = box.min[2], nr = box.extent[2];
  int64_t d0 = want_lse ? 0 : box.min[3], nd = want_lse ? 1 : box.extent[3];
  const HostTensor &Q = a[0], &K = a[1], &V = a[2];
  auto visible = [&](int64_t i) { // one past the last key row i sees
    int64_t last = L[b];
    if (causal) last = std::min(last, std::max<int64_t>(0, i + L[b] - S + 1));
    return last;
  };
  // Decode the keys and values this box reads once, row-major, so the loops below run over
  // contiguous doubles (decoding per element in the inner loops made a tuning check take 14 s).
  int64_t nk = 0;
  for (int64_t r = 0; r < nr; ++r)
    nk = std::max(nk, visible(r0 + r));
  std::vector<double> k(nk * D), v(nk * nd), q(D);
  const int64_t kv0 = (b * Hkv + hk) * Skv * D;
  for (int64_t j = 0; j < nk; ++j) {
    for (int64_t d = 0; d < D; ++d)
      k[j * D + d] = K.get(kv0 + j * D + d);
    for (int64_t d = 0; d < nd; ++d)
      v[j * nd + d] = V.get(kv0 + j * D + d0 + d);
  }
  std::vector<double> out(nr * nd);
  std::vector<double> sc(nk), acc(nd);
  for (int64_t r = 0; r < nr; ++r) {
    int64_t i = r0 + r;
    int64_t last = visible(i);
    for (int64_t d = 0; d < D; ++d)
      q[d] = Q.get(((b * H + h) * S + i) * D + d);
    double mx = -INFINITY;
    for (int64_t j = 0; j < last; ++j) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d)
        s += q[d] * k[j * D + d];
      sc[j] = s * scale;
      mx = std::max(mx, sc[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < last; ++j)
      sum += (sc[j] = std::exp(sc[j] - mx));
    if (want_lse) {
      out[r] = last > 0 ? mx + std::log(sum) : -INFINITY;
      continue;
    }
    // Same summation order per output element as a loop over j for each d.
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t j = 0; j < last; ++j)
      for (int64_t d = 0; d < nd; ++d)
        acc[d] += sc[j] * v[j * nd + d];
    for (int64_t d = 0; d < nd; ++d)
      out[r * nd + d] = last > 0 ? acc[d] / sum : 0.0;
  }
  return out;
}

double AttentionOp::flops(const Problem& p) const {
  // Two matmuls of 2 * D flops for every visible (query, key) pair.
  int64_t S = p.at("S"), H = p.at("H"), D = p.at("D");
  bool causal = p.get("causal", 0) != 0;
  double pairs = 0;
  for (int64_t L : key_lengths(p)) {
    if (!causal) {
      pairs += static_cast<double>(S) * L;
      continue;
    }
    for (int64_t i = 0; i < S; ++i)
      pairs += std::clamp<int64_t>(i + L - S + 1, 0, L);
  }
  return 4.0 * D * H * pairs;
}

std::string AttentionOp::unsupported_on(const Problem& p, const std::string& arch) const {
  int64_t D = p.at("D");
  if (arch == "cpu" || D == 64 || D == 128 || D == 256) return "";
  return "attention: D=" + std::to_string(D) + " has no " + arch +
         " kernel (the GPU kernels take D=64, 128 or 256; other multiples of 16 run only on " +
         "the CPU interpreter); use D=64, 128 or 256, or --backend cpu";
}

double AttentionOp::min_bytes(const Problem& p) const {
  double B = p.at("B"), H = p.at("H"), S = p.at("S"), D = p.at("D");
  double Skv = p.at("Skv"), Hkv = p.at("Hkv");
  return (2 * B * H * S * D + 2 * B * Hkv * Skv * D) * dtype_bytes(p.dtype);
}

} // namespace tp::ops

namespace tp::ops {

Problem AttentionOp::problem_for(const std::vector<std::vector<int64_t>>& shapes,
                                 const std::vector<DType>& dtypes,
                                 const std::map<std::string, std::string>& options) const {
  if (shapes.size() != 4 || dtypes.size() != 4)
    user_error() << "attention: takes four tensors (Q, K, V, O), got " << shapes.size();
  const DType dtype = dtypes[0];
  if (dtypes[1] != dtype || dtypes[2] != dtype || dtypes[3] != dtype)
    user_error() << "attention: Q is " << dtype_name(dtype) << " but K, V, O are "
                 << dtype_name(dtypes[1]) << ", " << dtype_name(dtypes[2]) << ", "
                 << dtype_name(dtypes[3]) << "; use one dtype for all four";
  const auto &q = shapes[0], &k = shapes[1], &v = shapes[2], &o = shapes[3];
  if (q.size() != 4 || k.size() != 4 || v.size() != 4 || o.size() != 4)
    user_error() << "attention: Q, K, V, O must be 4-d [batch, heads, seq, D], got Q "
                 << shape_text(q) << ", K " << shape_text(k) << ", V " << shape_text(v) << ", O "
                 << shape_text(o);
  if (k != v || o != q || k[0] != q[0] || k[3] != q[3])
    user_error() << "attention: shapes do not agree: Q " << shape_text(q) << ", K " << shape_text(k)
                 << ", V " << shape_text(v) << ", O " << shape_text(o)
                 << "; need Q, O [B, H, S, D] and K, V [B, Hkv, Skv, D]";
  const std::string causal = options.count("causal") ? options.at("causal") : "0";
  return parse({{"B", std::to_string(q[0])},
                {"H", std::to_string(q[1])},
                {"S", std::to_string(q[2])},
                {"D", std::to_string(q[3])},
                {"Hkv", std::to_string(k[1])},
                {"Skv", std::to_string(k[2])},
                {"causal", causal}},
               dtype);
}

std::string AttentionOp::variant_label(const Problem& p) const {
  bool causal = p.get("causal", 0) != 0, lens = p.options.count("lens") > 0;
  if (causal && lens) return "causal+padded";
  return causal ? "causal" : lens ? "padded" : "none";
}

} // namespace tp::ops
