// GEMM's pre-compile cost model and candidate order for the tuner.
//
// The estimates model the kernels the CUDA backend emits: wgmma on sm_90a (m64 per warpgroup,
// every warpgroup holds part of the accumulator), mma.sync m16n8k16 per warp on sm_80. They are
// deliberately simple; the ptxas report after compiling is the ground truth, so an estimate only
// has to avoid pruning configs that could work.
#include <cmath>
#include <sstream>

#include "ops/gemm/GemmGemv.h"
#include "ops/gemm/GemmOp.h"
#include "ops/gemm/GemmSwapAB.h"

namespace tp::ops {

namespace {

// Registers left for addresses, fragments of A/B and loop state: 255 (the per-thread hardware
// limit) minus this is the most the accumulator may hold before the kernel spills.
constexpr int64_t kHeadroom = 87; // => at most 168 accumulator registers

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

} // namespace

Estimate GemmOp::estimate(const Problem& p, const Config& c, const std::string& arch) const {
  // The GEMV (GemmGemv.h) has no MMA tile to model, and the swapped form's tile is bn x bm
  // (GemmSwapAB.h), not the bm x bn modelled below: the compiler's plan is their estimate.
  if (gemv::gemv_of(c) || swapab::swapped(c)) return Operator::estimate(p, c, arch);
  Estimate e;
  const int64_t elem = dtype_bytes(p.dtype);
  const int64_t bm = c.at("bm"), bn = c.at("bn"), bk = c.at("bk"), stages = c.at("stages"),
                threads = c.at("threads");
  const bool hopper = arch == "sm_90a";
  // Registers are this model's (only ptxas knows them); shared memory and the block size are
  // the compiler's own plan, below, once the tile divides over the MMA units.
  e.acc_regs = ceil_div(bm * bn, threads);
  e.live_regs = e.acc_regs;
  e.reg_budget = 255 - kHeadroom;
  std::ostringstream why;
  if (hopper) {
    if (threads % 128)
      why << "threads=" << threads << " is not whole warpgroups (a multiple of 128); wgmma is "
          << "issued by warpgroups";
    else if (bm % 64)
      why << "bm=" << bm << " is not a multiple of 64, the M of one wgmma";
    else if (int64_t w = threads / 128; (bm / 64) % w)
      // The compiler's wgmma accumulator layout gives each warpgroup whole 64-row slabs;
      // otherwise the gemm falls back to a slow path whose accumulator lives in shared memory,
      // which the tuner would compile only to reject.
      why << "bm=" << bm << " gives " << bm / 64 << " 64-row slab(s) for " << w
          << " warpgroups; bm must be a multiple of 64 x warpgroups (each owns whole slabs of "
          << "the accumulator)";
  } else if (arch == "sm_80") {
    const int64_t warps = threads / 32;
    if (threads % 32)
      why << "threads=" << threads << " is not whole warps (a multiple of 32)";
    else if (bm % 16 || bn % 8 || ((bm / 16) * (bn / 8)) % warps)
      why << "bm=" << bm << ", bn=" << bn << " has " << (bm / 16) * (bn / 8)
          << " m16n8 tiles, which do not divide evenly over " << warps << " warps";
  }
  e.divisibility = why.str();
  if (e.divisibility.empty()) {
    const Estimate plan = Operator::estimate(p, c, arch);
    e.smem_bytes = plan.smem_bytes;
    e.block_threads = plan.block_threads;
  } else {
    // Not lowered (the compiler would refuse it): A and B tiles per stage, as the plan has them.
    e.smem_bytes = stages * (bm * bk + bk * bn) * elem;
    e.block_threads = threads;
  }
  return e;
}

// Shape-aware preference: little padding in the last tile, full waves over the SMs, high
// arithmetic intensity per tile. Splits multiply the blocks and cost the partials' round trip
// (splits M N 4 bytes each way against the operands' (M + N) K 2), as choose_split counts it.
double GemmOp::score(const Problem& p, const Config& c, int sm_count) const {
  const int64_t bm = c.at("bm"), bn = c.at("bn"), M = p.at("M"), N = p.at("N"), K = p.at("K");
  const int64_t splits = c.count("splits") ? c.at("splits") : 1;
  const double used = double(M) * double(N);
  const double padded = double(ceil_div(M, bm) * bm) * double(ceil_div(N, bn) * bn);
  const double tiles = double(ceil_div(M, bm) * ceil_div(N, bn) * splits);
  const double partials = splits > 1 ? 4.0 * splits * used / (double(M + N) * double(K)) : 0;
  const double intensity = double(bm * bn) / double(bm + bn) / 128.0;
  const double sms = std::max(1, sm_count);
  const double waves = std::ceil(tiles / sms);
  return used / padded * (tiles / (waves * sms)) * std::sqrt(intensity) / (1 + partials);
}

} // namespace tp::ops
