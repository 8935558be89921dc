// w4a16 GEMM: C[M, N] = A[M, K] dequant(W), A and C bf16 (or f16), W int4 codes with one scale
// per column and group of `group` rows along K, as AWQ / GPTQ store them (symmetric, zero 8).
// Packing: W is i32 [K / 8, N]; word [r, n] holds rows 8r..8r+7 of column n, row 8r+i in bits
// 4i..4i+3 (unsigned code 0..15). scales [K / group, N] in the activation dtype.
//   w[k, n] = dtype((code[k, n] - 8) * scales[k / group, n])    (f32 product, one rounding)
// The kernel unpacks each K step's words into a shared B tile in the dtype and runs the
// tensor-core gemm on it with f32 accumulation; C rounds once. The kernel, parsing, configs,
// seeded inputs and the fp64 reference; W4a16GemmOp wraps these as an Operator.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilepilot/lang.h"
#include "tilepilot/problem.h"
#include "tilepilot/tensor.h"

namespace tp::ops::w4a16 {

/// Keys M, N, K, group (default 128); dtype bf16 or f16. User error naming the key and rule.
Problem parse(const std::map<std::string, std::string>& kv, DType dtype);
/// Decode (M <= 64): narrow column tiles so N spreads over the SMs; prefill: tensor-core tiles.
Config default_config(const Problem& p, const std::string& arch);
/// The reduction step nearest `preferred` (a multiple of 16) that `group` divides or that
/// divides `group`: a K step then reads whole scale rows. 0 when none up to 256 exists.
int64_t fitting_bk(int64_t group, int64_t preferred);
/// User error for rules between knobs and the problem (bk and group, tile multiples of 16).
void validate(const Problem& p, const Config& c);
/// Parameters A [M, K], W i32 [K / 8, N], scales [K / group, N], C [M, N]; M, N, K bound at
/// launch, group a compile-time constant. The one kernel of an unsplit config.
Kernel build(const Problem& p, const Config& c);
/// The config's `splits` (1 when absent). Above 1 (swap_ab=1 only), a call is a program: the
/// split kernel, then gemm's combine (ops/gemm/GemmSplitK.h) sums the partials into C.
int64_t splits_of(const Config& c);
/// The split form: parameters A, W, scales, P f32 [splits, M, N]; block z of grid z takes K
/// steps [z per, (z + 1) per), per = ceil(ceil(K / bk) / splits), and stores its partial in P[z].
Kernel build_split(const Problem& p, const Config& c);
/// A uniform in [-1, 1), W uniform random words (every code equally likely), scales in
/// [0.01, 0.1), C poisoned. No dense copy of the weights is made.
std::vector<HostTensor> make_args(const Problem& p, uint64_t seed);
/// fp64 C over rows [r0, r0 + nr) x columns [c0, c0 + nc), from weights dequantized (and
/// rounded into the dtype, as the kernel's B tile is) for those columns only.
std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args, int64_t r0,
                              int64_t nr, int64_t c0, int64_t nc);

} // namespace tp::ops::w4a16
