// Attention's pre-compile cost model, candidate order and tuning key.
#include <cmath>
#include <sstream>

#include "ops/attention/AttentionOp.h"

namespace tp::ops {

namespace {

// Registers left for addresses, loop state and the rows' statistics: at most 192 accumulator
// registers (FA3-style consumers run at 240 after setmaxnreg).
constexpr int64_t kHeadroom = 63;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

} // namespace

Problem AttentionOp::tuning_problem(const Problem& p) const {
  // Only the ratio of grouped heads changes the kernel, and the kernel is the same for any
  // per-batch lengths.
  Problem t = p;
  if (t.shape.count("Hkv") && t.shape.at("Hkv") > 0 && t.shape.count("H"))
    t.shape["group"] = t.shape.at("H") / t.shape.at("Hkv");
  t.shape.erase("Hkv");
  if (t.options.count("lens")) t.options["lens"] = "padded";
  return t;
}

Estimate AttentionOp::estimate(const Problem& p, const Config& c, const std::string& arch) const {
  Estimate e;
  const int64_t elem = dtype_bytes(p.dtype), D = p.at("D");
  const int64_t bm = c.at("bm"), bn = c.at("bn"), stages = c.at("stages"),
                threads = c.at("threads");
  const bool hopper = arch == "sm_90a";
  // Registers are this model's (only ptxas knows them); shared memory and the block size are
  // the compiler's own plan, below, once the tile divides over the MMA units.
  // O (fp32), scores (fp32) and probabilities (input dtype, packed) stay in registers.
  e.acc_regs = ceil_div(bm * D + bm * bn + bm * bn * elem / 4, threads);
  e.reg_budget = 255 - kHeadroom;
  // What must fit the block's register share: O and the fp32 scores (P is converted in place;
  // with P counted, D=256's 128x64 default, which fits, would go).
  e.live_regs = ceil_div(bm * D + bm * bn, threads);
  std::ostringstream why;
  if (hopper) {
    if (threads % 128)
      why << "threads=" << threads << " is not whole warpgroups (a multiple of 128); wgmma is "
          << "issued by warpgroups";
    else if (bm % 64)
      why << "bm=" << bm << " is not a multiple of 64, the M of one wgmma";
    else if (int64_t w = threads / 128; (bm / 64) % w)
      why << "bm=" << bm << " gives " << bm / 64 << " 64-row slab(s) for " << w
          << " warpgroups; bm must be a multiple of 64 x warpgroups (each owns whole slabs, "
          << "and its rows' softmax)";
  } else if (arch == "sm_80") {
    const int64_t warps = threads / 32;
    if (threads % 32)
      why << "threads=" << threads << " is not whole warps (a multiple of 32)";
    else if (bm % (16 * warps))
      why << "bm=" << bm << " is not a multiple of 16 x " << warps
          << " warps; each warp owns 16-row query slabs";
  }
  e.divisibility = why.str();
  if (e.divisibility.empty()) {
    const Estimate plan = Operator::estimate(p, c, arch);
    e.smem_bytes = plan.smem_bytes;
    e.block_threads = plan.block_threads;
  } else {
    // Not lowered (the compiler would refuse it): Q once, K and V per stage, as the plan has them.
    e.smem_bytes = (bm * D + stages * 2 * bn * D) * elem;
    e.block_threads = threads;
  }
  return e;
}

double AttentionOp::score(const Problem& p, const Config& c, int sm_count) const {
  const int64_t bm = c.at("bm"), bn = c.at("bn"), S = p.at("S");
  const double used = double(S), padded = double(ceil_div(S, bm) * bm);
  const double tiles = double(ceil_div(S, bm) * p.at("B") * p.at("H"));
  const double intensity = double(bm) / 128.0 * (bn >= 64 ? 1.0 : 0.8);
  const double sms = std::max(1, sm_count);
  const double waves = std::ceil(tiles / sms);
  return used / padded * (tiles / (waves * sms)) * std::sqrt(intensity);
}

} // namespace tp::ops
