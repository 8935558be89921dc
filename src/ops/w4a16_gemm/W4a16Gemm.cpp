// w4a16 GEMM's kernel, parsing, configs, inputs and fp64 reference (see W4a16Gemm.h). Each
// block owns a bm x bn tile of C; every K step copies A's tile, reads the step's packed words
// element-wise, unpacks their codes with shifts and masks into the shared B tile (scaled,
// rounded into the dtype) and runs the gemm: the weights move at a quarter of bf16's bytes.
#include "ops/w4a16_gemm/W4a16Gemm.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "ops/ParseHelpers.h"
#include "tilepilot/error.h"

namespace tp::ops::w4a16 {

namespace {

constexpr const char* kOp = "w4a16_gemm";
// The sm_90a defaults are sized for the H100/H200 SXM's 132 SMs; the tuner measures the device.
constexpr int64_t kSm90Sms = 132;

/// Code i (0..7) of a packed word. `>>` copies the sign bit, which the mask drops.
Expr code(const Expr& word, const Expr& i) {
  return (word >> (i * 4)) & 15;
}

/// The weight's integer part, code i - 8, as an f32 without an int-to-float conversion (those run
/// at a quarter of the f32 rate and were one of the unpacking's two conversions per weight): the
/// code in the low mantissa bits of 2^23 is the f32 2^23 + code, exactly.
Expr centred(const Expr& word, const Expr& i) {
  return bitcast(f32, code(word, i) | 0x4B000000) - 8388616.0f; // 2^23 + 8
}

} // namespace

int64_t fitting_bk(int64_t group, int64_t preferred) {
  auto fits = [&](int64_t bk) { return group % bk == 0 || bk % group == 0; };
  if (preferred % 16 == 0 && fits(preferred)) return preferred;
  // Nearest first, smaller before larger: a smaller step keeps shared memory in bounds.
  for (int64_t d = 16; d <= 256; d += 16)
    for (int64_t bk : {preferred - d, preferred + d})
      if (bk >= 16 && bk <= 256 && bk % 16 == 0 && fits(bk)) return bk;
  return 0;
}

Problem parse(const std::map<std::string, std::string>& kv, DType dtype) {
  reject_unknown(kv, {"M", "N", "K", "group"}, kOp);
  const std::string ex = "M=16,N=4096,K=4096,group=128";
  Problem p;
  p.op = kOp;
  p.dtype = dtype;
  for (const char* k : {"M", "N", "K"})
    p.shape[k] = require_positive(kv, k, kOp, ex);
  const int64_t K = p.shape["K"], group = optional_int(kv, "group", 128, kOp);
  p.shape["group"] = group;
  if (group % 8)
    user_error() << kOp << ": group=" << group
                 << " is not a multiple of 8; a packed i32 word holds 8 rows of K and they must "
                    "share one scale (use 32, 64 or 128)";
  if (K % group)
    user_error() << kOp << ": K=" << K << " is not a multiple of group=" << group
                 << "; every group of K rows has one scale row (pad K to "
                 << (K + group - 1) / group * group << " or use a group that divides K)";
  if (!fitting_bk(group, 64))
    user_error() << kOp << ": group=" << group
                 << " has no reduction step (a multiple of 16 up to 256) that it divides or "
                    "that divides it; use a group that is a multiple of 16";
  if (p.shape["M"] * K > 2147483647 || K / 8 * p.shape["N"] > 2147483647 ||
      p.shape["M"] * p.shape["N"] > 2147483647)
    user_error() << kOp << ": " << p.shape_str()
                 << " has a tensor of 2^31 elements or more, more than a kernel indexes; split M";
  if (dtype != DType::bf16 && dtype != DType::f16)
    user_error() << kOp << ": dtype " << dtype_name(dtype)
                 << " is not supported (activations, scales and C); use bf16 or f16";
  return p;
}

Config default_config(const Problem& p, const std::string& arch) {
  const int64_t M = p.at("M"), N = p.at("N"), group = p.at("group");
  auto with_bk = [&](Config c) {
    c["bk"] = fitting_bk(group, c["bk"]);
    return c;
  };
  if (arch == "cpu")
    return with_bk({{"bm", 64}, {"bn", 64}, {"bk", 32}, {"stages", 2}, {"threads", 128}});
  // Decode reads the weights once: its M <= 64 rows fit one tensor-core tile (wgmma's m64;
  // mma's m16 on sm_80) and the column tiles set how many blocks stream the words. The plain
  // sm_90a decode tiles (now for 16 < M <= 64) are what the pilot's tuner chose at M = 1 and 16
  // (H100, 2026-12-06, 91-130 trials a shape): 64 columns and bk = 128 at N = 4096, 256 columns
  // and bk = 64 at N = 28672; between the two measured N the switch is a guess. sm_80's are
  // priors, not measured on a GPU.
  const bool decode = M <= 64;
  if (arch == "sm_90a") {
    // M <= 16: the swapped form (weights unpacked into registers as wgmma's A operand, the 16
    // rows of A as its N), with as many blocks as fill the SMs. Measured against the plain
    // decode tiles and each other in single H100 calls (2026-12-06, m2-m5; docs/perf-log.md):
    // - N >= 24576: 256 columns over two warpgroups, bk 64 (M = 16 x 28672: 0.0480 ms against
    //   0.0544 for 64 columns with two blocks an SM and 0.0564 for the plain form);
    // - 132 x 64 <= N: 64 columns, bk 128, two blocks an SM (M = 16 x 14336: 0.0298 against
    //   0.0477 plain; 256 columns 0.0472);
    // - fewer tiles: K split so that about two blocks an SM run (N = 4096 is 64 tiles: four
    //   splits, bk 128, two blocks an SM: M = 1 x 4096 x 14336 0.0297 against 0.0535 unsplit,
    //   M = 1 x 4096 x 4096 0.0156 against 0.0192); where that gives fewer than three splits
    //   (N = 6144: 96 tiles) one block of bk 256 an SM without a split (0.0196; split in two
    //   0.0202). Each split keeps at least 4 K steps. The switch points are rules, measured at
    //   N = 4096, 6144, 14336 and 28672 only.
    if (M <= 16) {
      if (N >= 24576)
        return with_bk(
            {{"bm", 16}, {"bn", 256}, {"bk", 64}, {"stages", 4}, {"threads", 256}, {"swap_ab", 1}});
      Config c = {{"bm", 16},       {"bn", 64},     {"bk", 128},         {"stages", 4},
                  {"threads", 128}, {"swap_ab", 1}, {"blocks_per_sm", 2}};
      const int64_t tiles = (N + 63) / 64, steps = (p.at("K") + 127) / 128;
      if (tiles < kSm90Sms) {
        // About two blocks an SM (the tiles run two an SM), each split at least 4 K steps.
        const int64_t splits = std::min<int64_t>({4, 2 * kSm90Sms / tiles, steps / 4});
        if (splits >= 3)
          c["splits"] = splits;
        else
          c["bk"] = 256, c["blocks_per_sm"] = 1;
      }
      return with_bk(c);
    }
    if (decode)
      return with_bk({{"bm", 64},
                      {"bn", N >= 24576 ? 256 : 64},
                      {"bk", N >= 24576 ? 64 : 128},
                      {"stages", 4},
                      {"threads", 128}});
    // Prefill: the swapped form too. With the weights unpacked straight into registers no
    // unpacked tile goes through shared memory, and A's tile is wgmma's B (256 rows of M its
    // N). Against the plain 256 x 128 x 64 with 4 stages in one H100 call (m5): 4096^3 0.2440 ->
    // 0.1978 ms (695 TFLOP/s, 1.007x the bf16 GEMM's 690 in that call), 2048 x 4096 x 4096
    // 0.1282 -> 0.1035, 2048 x 28672 x 4096 0.8265 -> 0.7086, 2048 x 4096 x 14336 0.3846 ->
    // 0.3218, 1024 x 14336 x 4096 0.2426 -> 0.2030; 4 stages ran 1-3 % slower than 3, bk 128
    // with 2 stages 8-14 % slower, 128 x 128 tiles 15-20 % slower.
    return with_bk(
        {{"bm", 256}, {"bn", 128}, {"bk", 64}, {"stages", 3}, {"threads", 256}, {"swap_ab", 1}});
  }
  if (decode)
    return with_bk({{"bm", M <= 16 ? 16 : 64},
                    {"bn", N >= 108 * 64 ? 64 : 32},
                    {"bk", 128},
                    {"stages", 3},
                    {"threads", 128}});
  return with_bk({{"bm", 128}, {"bn", 128}, {"bk", 32}, {"stages", 3}, {"threads", 128}});
}

void validate(const Problem& p, const Config& c) {
  // Each knob's domain is its Knob's (check_config); this is the rule with the problem.
  const int64_t bk = c.at("bk"), group = p.at("group");
  if (group % bk && bk % group)
    user_error() << kOp << ": bk=" << bk << " and group=" << group
                 << " do not nest: a K step must lie in one scale group or cover whole groups; "
                 << "use bk=" << fitting_bk(group, bk);
  if (splits_of(c) > 1 && !(c.count("swap_ab") && c.at("swap_ab") == 1))
    user_error() << kOp << ": splits=" << c.at("splits")
                 << " needs swap_ab=1 (the decode form splits K); use splits=1 or swap_ab=1";
}

int64_t splits_of(const Config& c) {
  return c.count("splits") ? c.at("splits") : 1;
}

namespace {

/// The one kernel of a config (split false), or the split form's first step (split true).
Kernel build_kernel(const Problem& p, const Config& c, bool split) {
  validate(p, c);
  const int64_t bm = c.at("bm"), bn = c.at("bn"), bk = c.at("bk"), group = p.at("group");
  const DType dt = p.dtype;
  Dim M("M"), N("N"), K("K"), KW("KW"), KG("KG");
  Tensor A("A", {M, K}, dt), W("W", {KW, N}, i32), S("scales", {KG, N}, dt);
  Tensor C("C", {M, N}, dt);
  const int64_t splits = splits_of(c);
  Tensor P("P", {splits, M, N}, f32); // the split form's partials
  // The words and the scales a step needs are copied into shared tiles, so the pipeline
  // fetches them stages ahead like A; the parallel loop then reads shared memory, not global.
  // A step inside one group needs one scale row; a step over several groups needs bk / group
  // rows, where a word row finds its own.
  const bool one_row = group % bk == 0;
  const int64_t words_per_group = group / 8;
  auto body = [&](Var bx, Var by) {
    Tile As = alloc_shared({bm, bk}, dt), Bs = alloc_shared({bk, bn}, dt);
    Tile Ws = alloc_shared({bk / 8, bn}, i32);
    Tile sc = alloc_shared({one_row ? 1 : bk / group, bn}, dt);
    Tile acc = alloc_fragment({bm, bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, bk), static_cast<int>(c.at("stages")), [&](Var k) {
      copy(A.tile(by * bm, k * bk), As);
      copy(W.tile(k * (bk / 8), bx * bn), Ws);
      copy(S.tile(one_row ? k * bk / group : k * (bk / group), bx * bn), sc);
      parallel({bk / 8, bn}, [&](Var r, Var j) {
        // Words past N or past K read zeros (the copies' rule): codes that meet a zero scale
        // (the scale copy reads 0 there too) or a zero A column, in outputs that are never
        // stored or sums they do not change.
        // One read of the word and the scale for its eight codes.
        Var w = let("w", Ws(r, j));
        Var s = let("s", cast(f32, sc(one_row ? Expr(0) : r / words_per_group, j)));
        for (int i = 0; i < 8; ++i)
          Bs(r * 8 + i, j) = centred(w, i) * s;
      });
      gemm(As, Bs, acc);
    });
    copy(acc, C.tile(by * bm, bx * bn));
  };
  // Swapped (decode): C^T = W^T A^T. The weights are the tensor cores' A operand, unpacked
  // straight into registers in its layout (each thread its own elements: no shared B tile to
  // write and read back), and the few rows of A are the B operand, read from shared memory as
  // stored ([bm, bk], K-major: the `trans_b` form). bm is then wgmma's N (16 for M <= 16), so no
  // tensor-core rows are spent on padding, where the plain form computes 64 rows for M = 16.
  // Split (splits > 1, the program's first step): block z takes K steps [z per, (z + 1) per)
  // and stores its f32 partial into P[z] (an empty split stores zeros); the combine sums them.
  auto swapped = [&](Var bx, Var by, Expr z) {
    Expr nk = ceildiv(K, bk), per = split ? ceildiv(nk, splits) : nk;
    Expr k0 = split ? z * per : Expr(0), count = split ? max(min(per, nk - k0), 0) : nk;
    Tile As = alloc_shared({bm, bk}, dt);
    Tile Ws = alloc_shared({bk / 8, bn}, i32);
    Tile sc = alloc_shared({one_row ? 1 : bk / group, bn}, dt);
    Tile Wt = alloc_fragment({bn, bk}, dt);
    Tile acc = alloc_fragment({bn, bm}, f32);
    clear(acc);
    pipelined(count, static_cast<int>(c.at("stages")), [&](Var ks) {
      Expr k = k0 + ks;
      copy(A.tile(by * bm, k * bk), As);
      copy(W.tile(k * (bk / 8), bx * bn), Ws);
      copy(S.tile(one_row ? k * bk / group : k * (bk / group), bx * bn), sc);
      parallel({bn, bk}, [&](Var j, Var kk) {
        // Zeros past N or K, as in the plain form.
        Var s = let("s", cast(f32, sc(one_row ? Expr(0) : kk / group, j)));
        Wt(j, kk) = centred(Ws(kk / 8, j), kk % 8) * s;
      });
      gemm(Wt, As, acc, {.trans_b = true});
    });
    parallel({bn, bm}, [&](Var j, Var m) {
      if_then(by * bm + m < Expr(M) && bx * bn + j < Expr(N), [&] {
        if (split)
          P(z, by * bm + m, bx * bn + j) = acc(j, m);
        else
          C(by * bm + m, bx * bn + j) = acc(j, m);
      });
    });
  };
  const bool swap = c.count("swap_ab") && c.at("swap_ab") == 1;
  const int blocks_per_sm = c.count("blocks_per_sm") ? static_cast<int>(c.at("blocks_per_sm")) : 1;
  const std::string name = "w4a16_gemm_g" + std::to_string(group) + (swap ? "_swapped" : "");
  const KernelOptions opts{.blocks_per_sm = blocks_per_sm};
  const int T = static_cast<int>(c.at("threads"));
  if (split)
    return kernel(
        name + "_split_s" + std::to_string(splits), {A, W, S, P},
        grid(ceildiv(N, bn), ceildiv(M, bm), splits), threads(T),
        [&](Var bx, Var by, Var z) { swapped(bx, by, z); }, opts);
  return kernel(
      name, {A, W, S, C}, grid(ceildiv(N, bn), ceildiv(M, bm)), threads(T),
      [&](Var bx, Var by) { swap ? swapped(bx, by, Expr(0)) : body(bx, by); }, opts);
}

} // namespace

Kernel build(const Problem& p, const Config& c) {
  return build_kernel(p, c, false);
}

Kernel build_split(const Problem& p, const Config& c) {
  return build_kernel(p, c, true);
}

std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) {
  const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K"), group = p.at("group");
  std::vector<HostTensor> a;
  a.emplace_back(p.dtype, std::vector<int64_t>{M, K});
  a.back().fill_random(seed * 5 + 1);
  // Raw 32-bit draws: every bit pattern is a valid word, so every code is equally likely and
  // code 15 (the sign bit of the word's top nibble) is as common as the others.
  a.emplace_back(DType::i32, std::vector<int64_t>{K / 8, N});
  std::mt19937 gen(static_cast<uint32_t>(seed * 5 + 2));
  auto* words = static_cast<uint32_t*>(a.back().data());
  for (int64_t i = 0; i < a.back().numel(); ++i)
    words[i] = gen();
  a.emplace_back(p.dtype, std::vector<int64_t>{K / group, N});
  a.back().fill_random(seed * 5 + 3, 0.01, 0.1);
  a.emplace_back(p.dtype, std::vector<int64_t>{M, N});
  a.back().poison();
  return a;
}

std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& a, int64_t r0,
                              int64_t nr, int64_t c0, int64_t nc) {
  const int64_t N = p.at("N"), K = p.at("K"), group = p.at("group");
  const auto* words = static_cast<const uint32_t*>(a[1].data());
  // The box's columns of dequant(W), transposed to [nc, K] for a dot product per output.
  std::vector<double> wt(nc * K);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < nc; ++j) {
      const int64_t n = c0 + j;
      const int64_t c = (words[(k / 8) * N + n] >> (4 * (k % 8))) & 15;
      wt[j * K + k] = round_to(p.dtype, double(c - 8) * a[2].get((k / group) * N + n));
    }
  std::vector<double> row(K), out(nr * nc);
  for (int64_t i = 0; i < nr; ++i) {
    for (int64_t k = 0; k < K; ++k)
      row[k] = a[0].get((r0 + i) * K + k);
    for (int64_t j = 0; j < nc; ++j) {
      double s = 0;
      const double* w = &wt[j * K];
      for (int64_t k = 0; k < K; ++k)
        s += row[k] * w[k];
      out[i * nc + j] = s;
    }
  }
  return out;
}

} // namespace tp::ops::w4a16
