// The GEMM operator: its tile-language kernel, fp64 reference and problem handling.
#include "ops/gemm/GemmOp.h"

#include <algorithm>
#include <cmath>

#include "ops/ParseHelpers.h"
#include "ops/gemm/GemmGemv.h"
#include "ops/gemm/GemmPadK.h"
#include "ops/gemm/GemmSplitK.h"
#include "ops/gemm/GemmSwapAB.h"
#include "passes/Target.h"
#include "tilepilot/tilepilot.h"

namespace tp::ops {

Kernel gemm_kernel(DType dtype, const std::string& layout, const Config& c) {
  const int64_t bm = c.at("bm"), bn = c.at("bn"), bk = c.at("bk");
  const int stages = static_cast<int>(c.at("stages"));
  const bool ta = layout == "tn", tb = layout == "nt";
  Dim M("M"), N("N"), K("K");
  Tensor A("A", ta ? std::vector<Expr>{K, M} : std::vector<Expr>{M, K}, dtype);
  Tensor B("B", tb ? std::vector<Expr>{N, K} : std::vector<Expr>{K, N}, dtype);
  Tensor C("C", {M, N}, dtype);
  auto it = c.find("swizzle");
  int64_t swizzle = it == c.end() ? 0 : it->second;
  auto cl = c.find("cluster");
  int64_t cluster = cl == c.end() ? 1 : cl->second;
  auto ps = c.find("persistent");
  bool persistent = ps != c.end() && ps->second == 1;
  return kernel("gemm_" + layout, {A, B, C}, grid(ceildiv(N, bn), ceildiv(M, bm)),
                threads(static_cast<int>(c.at("threads"))), [&](Var bx, Var by) {
                  if (swizzle > 0) annotate("swizzle", std::to_string(swizzle));
                  // Pairs of blocks along M share B's tile: TMA multicast on sm_90a.
                  if (cluster > 1) annotate("cluster", std::to_string(cluster));
                  // About one block per SM taking tiles in turn (sm_90a warp-specialized).
                  if (persistent) annotate("persistent", "1");
                  Tile As = ta ? alloc_shared({bk, bm}, dtype) : alloc_shared({bm, bk}, dtype);
                  Tile Bs = tb ? alloc_shared({bn, bk}, dtype) : alloc_shared({bk, bn}, dtype);
                  Tile acc = alloc_fragment({bm, bn}, f32);
                  clear(acc);
                  // The schedule, stated: `stages` buffers per tile, copies on TMA with a
                  // producer warpgroup where the target has it (the sm_90a variant for aligned
                  // rows), cp.async multistage elsewhere. One gemm per iteration: nothing to
                  // defer or ping-pong (docs/schedules.md).
                  Schedule schedule{.stages = stages, .copies = Schedule::Copies::automatic};
                  pipelined(ceildiv(K, bk), schedule, [&](Var k) {
                    copy(ta ? A.tile(k * bk, by * bm) : A.tile(by * bm, k * bk), As);
                    copy(tb ? B.tile(bx * bn, k * bk) : B.tile(k * bk, bx * bn), Bs);
                    gemm(As, Bs, acc, {.trans_a = ta, .trans_b = tb});
                  });
                  copy(acc, C.tile(by * bm, bx * bn));
                });
}

std::string GemmOp::summary() const {
  return "C[M,N] = op(A) op(B); f32 accumulate; layout=nn|nt|tn";
}

std::vector<std::pair<std::string, std::string>> GemmOp::shape_keys() const {
  return {{"M", "rows of C"},
          {"N", "columns of C"},
          {"K", "reduction length"},
          {"layout", "nn (A[M,K], B[K,N]), nt (B is [N,K]), tn (A is [K,M]); default nn"}};
}

std::vector<Knob> GemmOp::knobs(const std::string& arch) const {
  const bool hopper = arch == "sm_90a";
  // The interpreter ("cpu") takes every config some GPU arch takes: it ignores what only TMA
  // kernels use (clusters, persistence).
  const bool tma = arch != "sm_80";
  // `values` is what the tuner searches on `arch`; min..max what a config may set.
  return {{"bm", {64, 128, 256}, "block tile rows (a multiple of 16)", 16, 512, 0, 16},
          // 32: the narrow tile decode shapes split over (wgmma n=32 on sm_90a).
          {"bn", {32, 64, 128, 192, 256}, "block tile columns (a multiple of 16)", 16, 512, 0, 16},
          // sm_90a: 64 bf16 = the 128-byte rows of the swizzled TMA/wgmma layout.
          {"bk", hopper ? std::vector<int64_t>{64} : std::vector<int64_t>{32, 64},
           "reduction step (a multiple of 16)", 16, 256, 0, 16},
          // A 1-stage pipeline never overlaps copy and compute; the tuner does not spend time on
          // it, and the sm_90a default for small tiles runs 8.
          {"stages", {2, 3, 4, 5}, "pipeline depth", 1, 8},
          {"threads", {128, 256, 384}, "threads per block (a multiple of 32)", 32, 1024, 0, 32},
          {"swizzle", {0, 4, 8, 16}, "block rasterization panel width (0: row-major)", 0, 64},
          // Clusters multicast TMA loads; without TMA the annotation would be dropped.
          {"cluster", hopper ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1},
           "blocks per cluster along M; 2 multicasts B's tile (sm_90a TMA)", 1, tma ? 2 : 1, 1},
          // Persistent blocks were never faster while the accumulator was stored from registers
          // (H200, 2026-11-30: 8192^3 +1.1 % time, M=128 +10 %). With TMA stores they are at some
          // shapes (H100, 2026-12-06, p3, against cuBLASLt in each process: 8192^3 714 -> 761
          // TFLOP/s, 4096^3 758 -> 771; 4096 x 28672 x 4096 764 -> 744), so sm_90a's tuner
          // tries both. The schedule exists for TMA kernels only.
          {"persistent", hopper ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0},
           "1: one block per SM loops over tiles (sm_90a TMA)", 0, tma ? 1 : 0},
          // Absent means 1 (neutral), so a release pinned before split-K still names its one
          // kernel. Knob values cannot depend on the shape, so the tuner tries these at every M;
          // no default splits yet (choose_split in GemmSplitK.cpp is the rule meant for M <= 64).
          {"splits",
           {1, 2, 4, 8},
           "K splits per output tile (1: one kernel; more: f32 partials summed by a second "
           "kernel)",
           1,
           splitk::kMaxSplits,
           1},
          // Not searched: a kernel for decode rows and layout nt only, which the default picks
          // there.
          {"gemv",
           {0},
           "R >= 1: layouts nt and nn as a matrix-vector product on the CUDA cores, R rows of A "
           "a block (B is read ceil(M / R) times); bn columns of C a block, bk a step (bm is "
           "not read)",
           0,
           gemv::kMaxRows},
          // Not searched yet, and no default takes it: its speed against split-K at decode
          // shapes is not measured (GemmSwapAB.h).
          {"swap_ab",
           {0},
           "1: C^T = B^T A^T for decode rows, N along the tensor cores' rows and M (bm, a "
           "multiple of 16) along their columns; one kernel over all of K, bn = 64 per 128 "
           "threads",
           0,
           1},
          // The shape decides it (from_default): the default sets it where it applies, and a
          // search keeps the default's value.
          {"pad_k",
           {0},
           "1: where K leaves operand rows not 16-byte aligned, a first kernel copies the "
           "operands with K padded by zeros, so the TMA kernel runs (no effect elsewhere); a "
           "search keeps the default's value",
           0,
           1,
           0,
           1,
           true}};
}

Problem GemmOp::parse(const std::map<std::string, std::string>& kv, DType dtype) const {
  reject_unknown(kv, {"M", "N", "K", "layout"}, "gemm");
  const std::string ex = "M=4096,N=4096,K=4096";
  Problem p;
  p.op = "gemm";
  p.dtype = dtype;
  for (const char* k : {"M", "N", "K"})
    p.shape[k] = require_positive(kv, k, "gemm", ex);
  std::string layout = kv.count("layout") ? kv.at("layout") : "nn";
  if (layout != "nn" && layout != "nt" && layout != "tn")
    user_error() << "gemm: layout=" << layout << " is not supported; use nn, nt or tn";
  p.options["layout"] = layout;
  if (dtype != DType::bf16 && dtype != DType::f16 && dtype != DType::f32)
    user_error() << "gemm: dtype " << dtype_name(dtype)
                 << " is not supported; use bf16, f16 or f32";
  return p;
}

namespace {

// The defaults are the H100/H200 SXM's (132 SMs); other sm_90a parts get them too, and the
// tuner measures on the device itself.
constexpr int kSm90Sms = 132;

/// sm_90a: the largest tile keeps the tensor cores busiest per byte loaded, but a grid of few
/// tiles leaves SMs idle (M = 128 with 128x256 tiles gives N/256 blocks for 132 SMs). Score
/// each candidate by its relative per-tile efficiency times the fraction of the last wave's
/// SMs that have work, and take the best. The efficiencies are relative throughputs measured
/// on the H200 (device run of 2026-11-30: 128x192 ran at 0.92 of 128x256 on 8192^3 and
/// 128x128 at 0.9 of 128x192 on M=1024,N=6144); the small tiles are priors. Small tiles
/// serve shapes that stream a large operand through few blocks (M = 128), so they take the
/// deepest pipeline that fits: 8 stages ran 10 % faster than 5 there.
Config sm90_default(const Operator& gemm, const Problem& p) {
  struct Candidate {
    int64_t bm, bn, stages, threads;
    double efficiency;
  };
  const Candidate candidates[] = {{128, 256, 4, 256, 1.0},  {128, 192, 4, 256, 0.92},
                                  {128, 128, 5, 256, 0.83}, {128, 64, 8, 256, 0.75},
                                  {64, 128, 8, 128, 0.75},  {64, 64, 8, 128, 0.6}};
  const double sms = kSm90Sms;
  // Grouped rasterization: blocks running together walk down panels of 8 block-rows, so they
  // share B's column panels in L2 (without it, N = 28672 re-reads B from HBM per block-row).
  auto config = [](const Candidate& c) -> Config {
    return {{"bm", c.bm},         {"bn", c.bn},           {"bk", 64},
            {"stages", c.stages}, {"threads", c.threads}, {"swizzle", 8}};
  };
  Config best;
  double best_score = -1;
  for (const Candidate& c : candidates) {
    double tiles = double((p.at("M") + c.bm - 1) / c.bm) * double((p.at("N") + c.bn - 1) / c.bn);
    double waves = std::ceil(tiles / sms);
    double score = c.efficiency * tiles / (waves * sms);
    if (score <= best_score + 1e-9) continue;
    Config cfg = fit_stages(gemm, p, config(c), "sm_90a");
    if (!fits_shared_memory(gemm, p, cfg, "sm_90a")) continue; // f32's largest tiles
    best = std::move(cfg), best_score = score;
  }
  // Two waves or more of the largest tile: about one block per SM takes tiles in turn, in
  // panels of 16 block-rows. Its next tile's first stages land while this one's accumulator is
  // stored. Side by side on an H100 (device run q2, 2026-12-06, two runs each), this gained
  // 1.5-3.6 % at M >= 2048 (4096^3 759 -> 781 TFLOP/s) and was level at 8192^3; a single wave
  // (M = 1024, N = 4096: 128 tiles) lost 1 %, so it keeps one block per tile.
  const int64_t bm = best.at("bm"), bn = best.at("bn");
  const double tiles = double((p.at("M") + bm - 1) / bm) * double((p.at("N") + bn - 1) / bn);
  if (bm == 128 && bn == 256 && tiles >= 2 * sms) {
    best["persistent"] = 1;
    best["swizzle"] = 16;
  }
  return best;
}

/// sm_90a, M <= 2 with B stored [N, K] (a framework Linear's weight), 2-byte operands: the GEMV
/// (GemmGemv.h) with one block row of M rows, unless its grid ends in a thin wave. Side by side
/// on an H100 (device run q3, 2026-12-06, against the split-K default and cuBLASLt 13.1 in each
/// process), at M = 1 its config was faster than the default at five of six shapes (N x K =
/// 4096 x 4096: 0.0240 -> 0.0196 ms, 1.10x cuBLASLt; 6144 x 4096 1.04x; 4096 x 14336 1.04x;
/// 28672 x 4096 1.02x; 128256 x 4096 1.06x) and slower at N = 14336 (0.0554 against 0.0529 ms):
/// 896 blocks of 16 rows, where 396 run at once (72 registers x 256 threads let three blocks
/// share an SM), end in a wave a quarter full. So: one wave or less, or waves at least 80 %
/// full on average. At M = 2 (run r1, H100), two rows a block ran 4096 x 4096 in 0.0200 ms
/// against split-K's 0.0238 and cuBLASLt's 0.0218; ptxas gives it 96 registers, two blocks an
/// SM. Four rows and more ran slower than split-K (150 registers and up, one block an SM).
Config gemv_default(const Problem& p) {
  const int64_t M = p.at("M");
  if (M > 2 || dtype_bytes(p.dtype) != 2) return {};
  if (p.options.at("layout") == "nn") {
    // B [K, N]: the GEMV's 32-column blocks win while they are at most one a SM. On an H100
    // (2026-12-07, call a3; split default / GEMV / cuBLASLt, ms): M = 1 at 4096 x 4096 0.0240 /
    // 0.0214 / 0.0200, at N = 4096, K = 14336 0.0561 / 0.0531 / 0.0530, M = 2 at 4096 x 4096
    // 0.0239 / 0.0226 / 0.0201; with more blocks the split default wins: N = 6144 0.0313 /
    // 0.0310 (a tie), 14336 0.0516 / 0.0581, 28672 0.0962 / 0.1101.
    Config c = gemv::gemv_config_nn();
    c["gemv"] = M;
    if ((p.at("N") + c.at("bn") - 1) / c.at("bn") <= kSm90Sms) return c;
    return {};
  }
  if (p.options.at("layout") != "nt") return {};
  Config c = gemv::gemv_config();
  c["gemv"] = M;
  const double blocks = double((p.at("N") + c.at("bn") - 1) / c.at("bn"));
  const double wave = (M == 1 ? 3.0 : 2.0) * kSm90Sms;
  if (blocks <= wave || blocks / (std::ceil(blocks / wave) * wave) >= 0.8) return c;
  return {};
}

} // namespace

bool fits_shared_memory(const Operator& gemm, const Problem& p, const Config& c,
                        const std::string& arch) {
  // bf16 and f16: every default candidate fits (their stage counts were sized for them).
  if (dtype_bytes(p.dtype) <= 2) return true;
  return gemm.estimate(p, c, arch).smem_bytes <= passes::Target::parse(arch).smem_limit();
}

Config fit_stages(const Operator& gemm, const Problem& p, Config c, const std::string& arch) {
  // The defaults' stage counts are sized for 2-byte operands; f32 tiles are twice as large, and
  // the compiler's plan (not a formula here) says what fits.
  while (c.at("stages") > 2 && !fits_shared_memory(gemm, p, c, arch))
    c["stages"] -= 1;
  return c;
}

Problem GemmOp::tuning_problem(const Problem& p) const {
  Problem t = p;
  t.shape["decode"] = p.at("M") <= kDecodeRows ? 1 : 0;
  return t;
}

Config GemmOp::default_config(const Problem& p, const std::string& arch) const {
  // tn with A's rows unaligned and K aligned: a first kernel copies only A (M x K) transposed,
  // so the shape takes nn's default after it, decode included (GemmPadK.h).
  if (arch == "sm_90a" && padk::pads(p) && !padk::pads_b(p)) {
    Problem q = p;
    q.options["layout"] = padk::steps_layout(p);
    Config c = default_config(q, arch);
    // The nn GEMV was timed on its own, not after the transposing kernel: keep split-K there.
    if (gemv::gemv_of(c))
      c = fit_stages(*this, q, splitk::split_config(splitk::choose_split(q, kSm90Sms)), arch);
    c["pad_k"] = 1;
    return c;
  }
  if (arch == "sm_90a") {
    Config c = gemv_default(p);
    if (!c.empty()) return c;
  }
  // Decode shapes (one block row) take split-K's rule: 64-row tiles, split to fill a wave.
  if (arch == "sm_90a" && p.at("M") <= kDecodeRows)
    return fit_stages(*this, p, splitk::split_config(splitk::choose_split(p, kSm90Sms)), arch);
  if (arch == "sm_90a") {
    Config c = sm90_default(*this, p);
    if (padk::pads(p)) c["pad_k"] = 1;
    return c;
  }
  if (arch == "sm_80")
    return {{"bm", 128}, {"bn", 128}, {"bk", 32}, {"stages", 3}, {"threads", 128}};
  return {{"bm", 64}, {"bn", 64}, {"bk", 32}, {"stages", 2}, {"threads", 128}};
}

void GemmOp::validate(const Problem& p, const Config& c) const {
  // Every knob's domain is its Knob's (check_config); the compiler reports a tile that does
  // not fit in its own words. The one rule between knobs is said here in the knobs' words, so
  // a tuner space or a pinned config hears it before building.
  // The split kernel has neither schedule: its blocks take one tile's share of K each.
  if (splitk::splits_of(c) > 1 && ((c.count("cluster") && c.at("cluster") > 1) ||
                                   (c.count("persistent") && c.at("persistent"))))
    user_error() << "gemm: splits=" << c.at("splits")
                 << " takes neither cluster=2 nor persistent=1; use splits=1 or leave them out";
  swapab::validate(c);
  if (gemv::gemv_of(c)) {
    // tn reaches the GEMV only through the first kernel's transposed A (its steps run nn).
    if (p.options.at("layout") == "tn" && !padk::aligns(p, c))
      user_error() << "gemm: gemv=" << c.at("gemv")
                   << " takes layout=nt or nn (got layout=tn); use gemv=0 for this shape";
    if (splitk::splits_of(c) > 1 || (c.count("cluster") && c.at("cluster") > 1) ||
        (c.count("persistent") && c.at("persistent")))
      user_error() << "gemm: gemv=" << c.at("gemv")
                   << " takes neither splits, cluster=2 nor persistent=1 (got " << config_str(c)
                   << "); set splits=1, cluster=1 and persistent=0 with it (a "
                   << "partial config takes the rest from the shape's default)";
  }
}

Kernel GemmOp::build(const Problem& p, const Config& c) const {
  // With splits, the program's last step (the one that writes C), as Operator::build says.
  if (splitk::splits_of(c) > 1) return splitk::build_combine(p.dtype, c);
  if (gemv::gemv_of(c)) return gemv::build_gemv(p.dtype, p.options.at("layout"), c);
  if (swapab::swapped(c)) return swapab::build_swapped(p.dtype, p.options.at("layout"), c);
  return gemm_kernel(p.dtype, p.options.at("layout"), c);
}

KernelProgram GemmOp::program(const Problem& p, const Config& c) const {
  // Where the first kernel aligns the operands, the steps after it read them in its layout
  // (tn's A transposed is nn).
  const bool aligns = padk::aligns(p, c);
  Problem q = p;
  if (aligns) q.options["layout"] = padk::steps_layout(p);
  KernelProgram prog;
  if (splitk::splits_of(c) <= 1) {
    prog = Operator::program(q, c);
  } else {
    // Call arguments A 0, B 1, C 2; the partials are intermediate 0, bound as 3.
    prog.intermediates = splitk::split_intermediates(q, c);
    prog.steps.push_back({splitk::build_split(q.dtype, q.options.at("layout"), c), {0, 1, 3}});
    prog.steps.push_back({splitk::build_combine(q.dtype, c), {3, 2}});
  }
  if (!aligns) return prog;
  // The aligned operands go first: they are the last intermediates, and every step reads them
  // where it read A (and B, where B is copied too).
  const bool pad_b = padk::pads_b(p);
  const int ap = 3 + static_cast<int>(prog.intermediates.size()), bp = pad_b ? ap + 1 : 1;
  for (const ArgSpec& s : padk::pad_intermediates(p))
    prog.intermediates.push_back(s);
  for (KernelStep& step : prog.steps)
    for (int& a : step.args)
      a = a == 0 ? ap : a == 1 ? bp : a;
  std::vector<int> args = pad_b ? std::vector<int>{0, 1, ap, bp} : std::vector<int>{0, ap};
  prog.steps.insert(prog.steps.begin(),
                    {padk::build_pad(p.dtype, p.options.at("layout"), pad_b), std::move(args)});
  return prog;
}

std::vector<ArgSpec> GemmOp::arg_specs(const Problem& p) const {
  int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
  const std::string& l = p.options.at("layout");
  return {{p.dtype, l == "tn" ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K}},
          {p.dtype, l == "nt" ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}},
          {p.dtype, {M, N}}};
}

// The operator's own seeds (not the default's) keep recorded repro seeds replaying the same
// inputs.
std::vector<HostTensor> GemmOp::make_args(const Problem& p, uint64_t seed) const {
  int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
  const std::string& l = p.options.at("layout");
  HostTensor A(p.dtype, l == "tn" ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K});
  HostTensor B(p.dtype, l == "nt" ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N});
  HostTensor C(p.dtype, {M, N});
  A.fill_random(seed * 3 + 1);
  B.fill_random(seed * 3 + 2);
  C.poison();
  std::vector<HostTensor> out;
  out.push_back(std::move(A));
  out.push_back(std::move(B));
  out.push_back(std::move(C));
  return out;
}

std::vector<double> GemmOp::reference(const Problem& p, const std::vector<HostTensor>& args,
                                      const Box& box) const {
  int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
  const std::string& l = p.options.at("layout");
  const HostTensor &A = args[0], &B = args[1];
  // Decode the operands once (transposed into row-major op(A), op(B)^T for a dot product).
  int64_t r0 = box.min[0], r1 = box.min[0] + box.extent[0];
  int64_t c0 = box.min[1], c1 = box.min[1] + box.extent[1];
  std::vector<double> a((r1 - r0) * K), bt((c1 - c0) * K);
  for (int64_t m = r0; m < r1; ++m)
    for (int64_t k = 0; k < K; ++k)
      a[(m - r0) * K + k] = A.get(l == "tn" ? k * M + m : m * K + k);
  for (int64_t n = c0; n < c1; ++n)
    for (int64_t k = 0; k < K; ++k)
      bt[(n - c0) * K + k] = B.get(l == "nt" ? n * K + k : k * N + n);
  std::vector<double> out(box.extent[0] * box.extent[1]);
  for (int64_t m = 0; m < r1 - r0; ++m)
    for (int64_t n = 0; n < c1 - c0; ++n) {
      double s = 0;
      const double* x = &a[m * K];
      const double* y = &bt[n * K];
      for (int64_t k = 0; k < K; ++k)
        s += x[k] * y[k];
      out[m * (c1 - c0) + n] = s;
    }
  return out;
}

double GemmOp::flops(const Problem& p) const {
  return 2.0 * p.at("M") * p.at("N") * p.at("K");
}

double GemmOp::min_bytes(const Problem& p) const {
  double M = p.at("M"), N = p.at("N"), K = p.at("K");
  return (M * K + K * N + M * N) * dtype_bytes(p.dtype);
}

} // namespace tp::ops

namespace tp::ops {

Problem GemmOp::problem_for(const std::vector<std::vector<int64_t>>& shapes,
                            const std::vector<DType>& dtypes,
                            const std::map<std::string, std::string>& options) const {
  if (shapes.size() != 3 || dtypes.size() != 3)
    user_error() << "gemm: takes three tensors (A, B, C), got " << shapes.size();
  const DType dtype = dtypes[0];
  if (dtypes[1] != dtype || dtypes[2] != dtype)
    user_error() << "gemm: A is " << dtype_name(dtype) << " but B is " << dtype_name(dtypes[1])
                 << " and C is " << dtype_name(dtypes[2]) << "; use one dtype for all three";
  const auto &a = shapes[0], &b = shapes[1], &c = shapes[2];
  if (a.size() != 2 || b.size() != 2 || c.size() != 2)
    user_error() << "gemm: A, B and C must be 2-d, got A " << shape_text(a) << ", B "
                 << shape_text(b) << ", C " << shape_text(c);
  const std::string layout = options.count("layout") ? options.at("layout") : "nn";
  if (layout != "nn" && layout != "nt" && layout != "tn")
    user_error() << "gemm: layout " << layout << " is not supported; use nn, nt or tn";
  int64_t M = layout == "tn" ? a[1] : a[0], K = layout == "tn" ? a[0] : a[1];
  int64_t N = layout == "nt" ? b[0] : b[1], Kb = layout == "nt" ? b[1] : b[0];
  if (Kb != K || c[0] != M || c[1] != N)
    user_error() << "gemm: shapes do not agree for layout " << layout << ": A " << shape_text(a)
                 << ", B " << shape_text(b) << ", C " << shape_text(c) << "; layout " << layout
                 << " needs A " << (layout == "tn" ? "[K, M]" : "[M, K]") << ", B "
                 << (layout == "nt" ? "[N, K]" : "[K, N]") << ", C [M, N]";
  return parse({{"M", std::to_string(M)},
                {"N", std::to_string(N)},
                {"K", std::to_string(K)},
                {"layout", layout}},
               dtype);
}

} // namespace tp::ops
