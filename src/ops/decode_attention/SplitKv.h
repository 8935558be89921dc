// Split-KV decode attention: decode_attention's kernel with the keys of each sequence split
// over `splits` blocks, then a second kernel that merges the partials through their
// log-sum-exp. At small batch the single kernel has B x Hkv blocks (8 on Llama-3-8B at B=1);
// splitting the keys multiplies that by `splits`.
//
// Kernels and their parameters (outputs last):
//   split:   decode_attention's inputs (q, k, v[, lens] or q, k_cache, v_cache, block_table,
//            lens), then o_part f32 [B, H, splits, Sq, D] and lse_part f32 [B, H, splits, Sq]
//   combine: o_part, lse_part, out [B, H, Sq, D]
// o_part holds each split's output normalised by its own softmax sum; lse_part its natural
// log-sum-exp of the scaled scores, -inf for a split that sees no key (its o_part is 0). The
// combine gives out = sum_s exp(lse_s - lse) o_s with lse = log sum_s exp(lse_s), and 0 where
// no split saw a key: the single kernel's output, bit for bit at splits = 1.
#pragma once
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops::decode_attention {

/// The most splits a config may take (the combine unrolls its loop over them).
constexpr int64_t kMaxSplits = 64;

/// The config's `splits`, checked: 1..kMaxSplits (user error otherwise, or when it is absent).
int64_t splits_of(const Config& c);
/// Kernel 1: split z of the key blocks of each (query-head tile, KV head, sequence).
Kernel build_split(const Problem& p, const Config& c);
/// Kernel 2: merges the splits per (sequence, head, query token) into out.
Kernel build_combine(const Problem& p, const Config& c);
/// The intermediates between the two: o_part and lse_part (shapes above).
std::vector<ArgSpec> split_intermediates(const Problem& p, const Config& c);
/// Splits that fill a GPU of `sm_count` SMs with c's tiles: see SplitKv.cpp for the rule.
int64_t choose_splits(const Problem& p, const Config& c, int sm_count);

} // namespace tp::ops::decode_attention
