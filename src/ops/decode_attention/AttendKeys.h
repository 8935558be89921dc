// The work one block of either decode_attention kernel does (the single kernel in
// DecodeAttention.cpp, the split kernel in SplitKv.cpp): its tile of query rows against a
// contiguous range of its sequence's key blocks, with lesson 13's online softmax. One
// definition, so the two kernels cannot drift apart in rows, masks, paging or softmax.
#pragma once
#include <string>
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops::decode_attention {

/// Both kernels' input tensors; `params` lists them in parameter order (outputs follow).
struct Inputs {
  Dim B, H, Hkv, L; // L: the cache length (per sequence when there is no lens tensor)
  Tensor q, k, v, table, lens;
  std::vector<Tensor> params;
};
Inputs make_inputs(const Problem& p, const Config& c);
/// "_d128_g4_sq1" and the cache layout: the part of both kernels' names the problem gives.
std::string kernel_tag(const Problem& p, const Config& c);
/// Sequence b's key count: lens(b), or L without lens.
Expr seq_len(const Problem& p, const Inputs& in, const Expr& b);

/// What a block holds after its keys, per row of its [bm, D] tile: o, the softmax-weighted
/// sum of values, unnormalised; l, the sum of weights (0 where the row saw no visible key); m,
/// the largest raw score q.k (not scaled; -inf where l = 0).
struct Partial {
  Tile o, l, m;
};
/// Emits, into the current kernel body, block (query-head tile rx, KV head hk, sequence b) of
/// len keys over key blocks [kb0, kb0 + count) (bn keys or one page each). Row i of the tile is
/// head rx hpt + i / Sq of hk's group, token i % Sq; rows past the tile's heads repeat its last
/// row and are not to be stored. kb0 = 0 takes the loop index itself as the key block.
Partial attend_keys(const Problem& p, const Config& c, const Inputs& in, const Expr& rx,
                    const Expr& hk, const Expr& b, const Expr& len, const Expr& kb0,
                    const Expr& count);

} // namespace tp::ops::decode_attention
