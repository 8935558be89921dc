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
  return kernel("gemm_combine_s" + std::to_string(ns), {P, C},
                grid(ceildiv(N, cols), ceildiv(M, rows)), threads(256), [&](Var bx, Var by) {
                  // Every split's tile is loaded before any is added, so all the loads are in
                  // flight at once; added one split at a time, each add waited for its load
                  // before the next load issued. That combine took 4.3 us at M = 4, N = 4096, 4
                  // splits (ncu, H100, 2026-12-07). With this form the whole GEMM measured the
                  // same (0.0240 ms, b2006f5); the combine alone was not profiled again.
                  std::vector<Tile> parts;
                  for (int64_t z = 0; z < ns; ++z) {
                    parts.push_back(alloc_fragment({rows, cols}, f32));
                    copy(P.tile(Expr(z), by * rows, bx * cols), parts.back());
                  }
                  Tile sum = alloc_fragment({rows, cols}, f32);
                  parallel({rows, cols}, [&](Var i, Var j) {
                    Expr s = parts[0](i, j);
                    for (int64_t z = 1; z < ns; ++z)
                      s = s + parts[static_cast<size_t>(z)](i, j);
                    sum(i, j) = s;
                  });
                  copy(sum, C.tile(by * rows, bx * cols)); // the one rounding to C's dtype
                });
}

std::vector<ArgSpec> split_intermediates(const Problem& p, const Config& c) {
  return {{DType::f32, {splits_of(c), p.at("M"), p.at("N")}}};
}

// The rule, read off the H200 (2026-12-02, calls t1 and t2: 15 decode shapes, each default
// and 7 to 8 configs of bm = 64, bk = 64, 8 stages, side by side with cuBLASLt; the numbers are
// in docs/perf-log.md). At M <= 64 a GEMM is one block row streaming B (N K 2 bytes) and its
// time is B's bytes over the bandwidth its blocks draw:
//   - one row of 64 (not the 128 of sm90_default's larger candidates, half of whose MMA rows
//     are empty): 64x128 unsplit ran 1.43x the default at M=1, N=14336 and 1.27x at M=1,
//     N=6144;
//   - 128 columns at M <= 16 (A's few rows cost nothing to re-read, and a wider tile draws
//     more bytes per block), 64 above, where 64x64 split in two ran 3 to 10 % faster than
//     64x128 at M = 32 and 64 - unless 64 columns give more tiles than SMs (N > 8448), when
//     the partial second wave costs more than the re-reads save;
//   - splits to make about one wave, floor(sm_count / tiles), at most 4 (6 and 8 ran slower
//     than 4 at every shape: each split pays its pipeline's fill and its partial's round trip,
//     and the combine is a second launch) and no fewer than 8 K steps of 64 each, evened out to
//     ceil(nk / ceil(nk / s)) so that no split is empty. At N = 4096 that is 32 tiles x 4
//     (M=1, K=4096: 0.78x cuBLASLt against the unsplit default's 0.47x; K=14336: 0.86x against
//     0.36x); at N >= 14336 the tiles fill the SMs alone and the kernel is not split.
// At M <= 16 the H100 (run r2, 2026-12-06, the kernel of that day: a search of bn 32..128,
// bk 64 and 128, 4 to 8 stages and 1, 2 or 4 splits at six decode shapes, then the winner
// against cuBLASLt 13.1) ran best unsplit at every shape, with 64 x 96 tiles where they fit in
// one wave: M = 7, N = 6144: 0.0280 ms against the split default's 0.0319 (0.90x -> 1.02x
// cuBLASLt); M = 2 and 4, N = 4096: 0.0232 against 0.0242 (43 tiles: a block draws well over
// its share of the bandwidth, so fewer blocks streaming more lose nothing, and no split pays a
// pipeline fill, a partial's round trip and a second launch); M = 16, N = 4096: unsplit
// 64 x 64 with bk = 128 0.0222 against 0.0246; M = 8 and 1, N = 14336: unsplit 64 x 128 (the
// default already). Run r3 held the unsplit rule to the split one side by side: it won at
// N = 4096 and 6144 with K = 4096 in layout nt (M = 2..16: 0.90x -> 0.95-1.01x) but lost at
// K = 14336 (M = 4: 0.95x -> 0.83x: 43 blocks streaming 14336 columns each), in layout nn
// (0.81x -> 0.80x) and in tn, whose A rows of M elements take the variant without TMA
// (0.33x -> 0.24x: fewer blocks hide its plain loads' latency worse). So only nt with K <= 4096
// at M <= 16 is not split: 96 columns where ceil(N / 96) tiles fit the SMs, else 128.
SplitChoice choose_split(const Problem& p, int sm_count) {
  constexpr int64_t kMinSteps = 8, kMostSplits = 4, bk = 64;
  if (sm_count < 1)
    user_error() << "gemm: choose_split needs the device's SM count (>= 1), got " << sm_count;
  const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
  if (M > 64) return {64, 1};
  if (M <= 16 && p.options.at("layout") == "nt" && K <= 4096)
    return {ceil_div(N, 96) <= sm_count ? 96 : 128, 1};
  const int64_t bn = M <= 16 || ceil_div(N, 64) > sm_count ? 128 : 64;
  const int64_t nk = ceil_div(K, bk), tiles = ceil_div(N, bn);
  const int64_t most = std::min(kMostSplits, std::max<int64_t>(1, nk / kMinSteps));
  const int64_t s = std::clamp<int64_t>(sm_count / tiles, 1, most);
  return {bn, ceil_div(nk, ceil_div(nk, s))};
}

Config split_config(const SplitChoice& s) {
  Config c = {{"bm", 64}, {"bn", s.bn}, {"bk", 64}, {"stages", 8}, {"threads", 128}};
  if (s.splits > 1) c["splits"] = s.splits; // unsplit: no knob, so the key is today's kernel's
  return c;
}

} // namespace tp::ops::splitk
