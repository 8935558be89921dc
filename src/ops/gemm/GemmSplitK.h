// Split-K GEMM for decode shapes: the K loop of each output tile split over `splits` blocks
// (grid z), each storing its f32 partial, then a second kernel that sums the partials into C.
// At M <= 64 the plain kernel has one block row, N / bn blocks (64 for N = 4096 on 132 SMs),
// each streaming all of K; splitting K multiplies the blocks by `splits`.
//
// Kernels and their parameters (outputs last):
//   split:   A, B (as the layout gives them), P f32 [splits, M, N]
//   combine: P, C [M, N]
// Split z takes the K blocks [z per, min((z + 1) per, nk)), nk = ceil(K / bk),
// per = ceil(nk / splits); a trailing split may get none and stores zeros. The combine gives
// C = sum_z P[z], summed in f32 in z order and rounded once to C's dtype.
#pragma once
#include <string>
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops::splitk {

/// The most splits a config may take (the combine unrolls its loop over them).
constexpr int64_t kMaxSplits = 16;

/// The config's `splits`: 1 when absent (the neutral value), else checked to 1..kMaxSplits.
int64_t splits_of(const Config& c);
/// Kernel 1: split z of the K blocks of output tile (bx, by) into P[z].
Kernel build_split(DType dtype, const std::string& layout, const Config& c);
/// Kernel 2: C = sum over z of P[z], rounded once to `dtype`.
Kernel build_combine(DType dtype, const Config& c);
/// The intermediate between the two: P f32 [splits, M, N].
std::vector<ArgSpec> split_intermediates(const Problem& p, const Config& c);

/// A decode shape's tile width and split count (splits 1: do not split).
struct SplitChoice {
  int64_t bn = 64, splits = 1;
};
/// The sm_90a rule for M <= 64 (one block row of bm = 64, bk = 64) on a GPU of `sm_count` SMs,
/// measured on the H200: see GemmSplitK.cpp. splits = 1 where the tiles alone fill the SMs or
/// K is short; {64, 1} for M > 64, where sm90_default's tiles apply instead.
SplitChoice choose_split(const Problem& p, int sm_count);
/// The sm_90a config of a choice: one block row of 64-row tiles with an 8-stage pipeline,
/// `splits` set when above 1. GemmOp's default at M <= 64 (stages fitted for f32).
Config split_config(const SplitChoice& s);

} // namespace tp::ops::splitk
