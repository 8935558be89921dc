// Split-K GEMM (see GemmSplitK.h): the split kernel, the combine kernel, their intermediate
// and the sm_90a rule that picks the tile width and split count for decode shapes.
//
// The split kernel is gemm_kernel's block work (GemmOp.cpp) with the K loop's range taken from
// the grid's z and the tile stored to P as it is: a copy, so edge rows and columns beyond
// M, N are dropped as the single kernel's store drops them. It is written out here rather than
// shared with gemm_kernel: the single kernel's IR is its cache key and what releases pinned
// before the knob existed name, so it must not change.
#include "ops/gemm/GemmSplitK.h"

#include <algorithm>

#include "tilepilot/error.h"
#include "tilepilot/tilepilot.h"

namespace tp::ops::splitk {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int64_t knob_or(const Config& c, const std::string& name, int64_t neutral) {
  auto it = c.find(name);
  return it == c.end() ? neutral : it->second;
}

} // namespace

int64_t splits_of(const Config& c) {
  const int64_t s = knob_or(c, "splits", 1);
  if (s < 1 || s > kMaxSplits)
    user_error() << "gemm: splits=" << s << " is outside 1.." << kMaxSplits << "; the combine sums "
                 << "at most " << kMaxSplits << " partials";
  return s;
}

Kernel build_split(DType dtype, const std::string& layout, const Config& c) {
  const int64_t bm = c.at("bm"), bn = c.at("bn"), bk = c.at("bk"), ns = splits_of(c);
  const int stages = static_cast<int>(c.at("stages"));
  const int64_t swizzle = knob_or(c, "swizzle", 0);
  const bool ta = layout == "tn", tb = layout == "nt";
  Dim M("M"), N("N"), K("K");
  Tensor A("A", ta ? std::vector<Expr>{K, M} : std::vector<Expr>{M, K}, dtype);
  Tensor B("B", tb ? std::vector<Expr>{N, K} : std::vector<Expr>{K, N}, dtype);
  Tensor P("P", {ns, M, N}, f32);
  return kernel("gemm_" + layout + "_split_s" + std::to_string(ns), {A, B, P},
                grid(ceildiv(N, bn), ceildiv(M, bm), ns),
                threads(static_cast<int>(c.at("threads"))), [&](Var bx, Var by, Var z) {
                  if (swizzle > 0) annotate("swizzle", std::to_string(swizzle));
                  Tile As = ta ? alloc_shared({bk, bm}, dtype) : alloc_shared({bm, bk}, dtype);
                  Tile Bs = tb ? alloc_shared({bn, bk}, dtype) : alloc_shared({bk, bn}, dtype);
                  Tile acc = alloc_fragment({bm, bn}, f32);
                  Expr nk = ceildiv(K, bk), per = ceildiv(nk, ns);
                  Expr k0 = z * per, count = max(min(per, nk - k0), 0);
                  clear(acc);
                  // gemm_kernel's schedule: TMA with a producer warpgroup where the target has
                  // it, cp.async multistage elsewhere.
                  Schedule schedule{.stages = stages, .copies = Schedule::Copies::automatic};
                  pipelined(count, schedule, [&](Var kk) {
                    Expr k = k0 + kk;
                    copy(ta ? A.tile(k * bk, by * bm) : A.tile(by * bm, k * bk), As);
                    copy(tb ? B.tile(bx * bn, k * bk) : B.tile(k * bk, bx * bn), Bs);
                    gemm(As, Bs, acc, {.trans_a = ta, .trans_b = tb});
                  });
                  // An empty split (count 0) stores its cleared tile: zeros the combine adds.
                  copy(acc, P.tile(z, by * bm, bx * bn));
                });
}

Kernel build_combine(DType dtype, const Config& c) {
  const int64_t ns = splits_of(c);
  // 8 x 128 f32 a block, 256 threads: each thread sums runs of 4 consecutive f32 (16-byte
  // loads), so a warp reads 512 contiguous bytes of a row per split. The kernel is a stream of
  // ns M N 4 bytes; 8 rows cover M <= 8 in one block row, the decode shapes it serves.
  constexpr int64_t rows = 8, cols = 128;
  Dim M("M"), N("N");
  Tensor P("P", {ns, M, N}, f32), C("C", {M, N}, dtype);
  return kernel(
      "gemm_combine_s" + std::to_string(ns), {P, C}, grid(ceildiv(N, cols), ceildiv(M, rows)),
      threads(256), [&](Var bx, Var by) {
        Tile part = alloc_fragment({rows, cols}, f32);
        Tile sum = alloc_fragment({rows, cols}, f32);
        clear(sum);
        // Unrolled: the splits' loads are independent, so they are all in flight.
        unrolled(ns, [&](Var z) {
          copy(P.tile(z, by * rows, bx * cols), part);
          parallel({rows, cols}, [&](Var i, Var j) { sum(i, j) = sum(i, j) + part(i, j); });
        });
        copy(sum, C.tile(by * rows, bx * cols)); // the one rounding to C's dtype
      });
}

std::vector<ArgSpec> split_intermediates(const Problem& p, const Config& c) {
  return {{DType::f32, {splits_of(c), p.at("M"), p.at("N")}}};
}

// The rule, from the tile and grid arithmetic of the shapes measured on the H200 (M=1 and 7,
// N=4096..6144, K=4096: 0.47x cuBLASLt with 64x64 tiles, N / 64 = 64..96 blocks on 132 SMs).
// At M <= 64 a GEMM streams B (N K 2 bytes) through one block row of bm = 64: its time is B's
// bytes over the bandwidth its blocks draw, and 64 blocks draw about half of it. A candidate
// (bn, s) is scored as fill x efficiency:
//   - fill = min(1, blocks / (2 sm_count)), blocks = ceil(M / 64) ceil(N / bn) s. Two blocks
//     per SM (one is resident at a time with 8 stages of 64-wide tiles: 128 KB) keep the last,
//     partial wave a small share of the time;
//   - efficiency = B's bytes over all bytes moved: B, plus A's panel re-read by each of the
//     N / bn tile columns (mostly from L2, counted at half an HBM byte), plus the partials'
//     round trip (s M N 4 bytes written, then read): 1 / (1 + M / (2 bn) + 4 s M / K).
//     Wider tiles re-read A less; fewer splits move fewer partials.
// Candidates: bn in {64, 128, 32} (ties go to the first: 64 is today's tile for these shapes),
// s in 1..kMaxSplits with every split keeping >= kMinSteps K steps of bk = 64 (a split's fixed
// cost, its pipeline's fill and its partial's store, stays small against its loop), evened out
// to ceil(nk / ceil(nk / s)) so that no split is empty. Past the fill target more splits only
// cost, so the best s of a bn is the fewest that fill. The split must beat the best one-kernel
// candidate (s = 1, any of the three widths) by kMinGain: the second kernel's launch and its
// read of the partials are a fixed few microseconds the score does not see (a 4096 x 4096
// decode GEMM streams 32 MB: 10 at 3.2 TB/s). Otherwise splits = 1: keep today's default.
// Priors from arithmetic, to be tuned on the GPU (the tuner searches splits).
SplitChoice choose_split(const Problem& p, int sm_count) {
  constexpr int64_t kMinSteps = 4, bm = 64, bk = 64;
  constexpr double kMinGain = 1.15;
  if (sm_count < 1)
    user_error() << "gemm: choose_split needs the device's SM count (>= 1), got " << sm_count;
  const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
  if (M > 64) return {64, 1};
  const int64_t nk = ceil_div(K, bk);
  const int64_t most = std::clamp<int64_t>(nk / kMinSteps, 1, kMaxSplits);
  const double target = 2.0 * sm_count;
  SplitChoice best;
  double best_split = -1, best_single = -1;
  for (int64_t bn : {64, 128, 32})
    for (int64_t s = 1; s <= most; ++s) {
      const int64_t even = ceil_div(nk, ceil_div(nk, s));
      const double blocks = double(ceil_div(M, bm) * ceil_div(N, bn) * even);
      const double fill = std::min(1.0, blocks / target);
      const double moved = 1 + double(M) / (2.0 * bn) + (even > 1 ? 4.0 * even * M / double(K) : 0);
      const double score = fill / moved;
      if (even == 1)
        best_single = std::max(best_single, score);
      else if (score > best_split + 1e-9)
        best = {bn, even}, best_split = score;
    }
  if (best_split < kMinGain * best_single) return {64, 1};
  return best;
}

Config split_config(const SplitChoice& s) {
  return {{"bm", 64},    {"bn", s.bn},     {"bk", 64},
          {"stages", 8}, {"threads", 128}, {"splits", s.splits}};
}

} // namespace tp::ops::splitk
