// decode_attention's kernel, parsing, inputs and fp64 reference, shared by DecodeAttentionOp,
// its framework chain and the tests.
//
// Tensors (parameter order; outputs last):
//   contiguous: q [B, H, Sq, D], k, v [B, Hkv, L, D], lens i32 [B] (only with lens=), out
//   paged:      q, k_cache, v_cache [num_blocks, Hkv, block, D], block_table i32 [B, MB],
//               lens i32 [B], out
// out is [B, H, Sq, D]. MB = ceil(L / block) pages per sequence; num_blocks = B * MB. The page
// layout is [num_blocks, Hkv, block, D] (not vLLM's [num_blocks, block, Hkv, D]) so that one
// page of one KV head is a contiguous [block, D] tile. Query token t of Sq sees keys
// j < len_b - Sq + t + 1 (causal, bottom-right aligned as attention defines it); a sequence of
// length 0 (or a token that sees no key) gives an output of 0.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops::decode_attention {

Problem parse(const std::map<std::string, std::string>& kv, DType dtype);
bool paged(const Problem& p);
/// Per-batch KV lengths: lens= when given, else L for every sequence.
std::vector<int64_t> lengths(const Problem& p);
/// Pages per sequence (block table columns) and pages in the cache; 0 when not paged.
int64_t pages_per_seq(const Problem& p);
int64_t num_pages(const Problem& p);
/// Whether the kernel takes a lens tensor (paged always; contiguous with lens=).
bool has_lens(const Problem& p);
/// Parameter indices.
int lens_index(const Problem& p);
int out_index(const Problem& p);

Config default_config(const Problem& p, const std::string& arch);
void validate(const Problem& p, const Config& c);
/// Query heads of a KV head's group one block takes: as many whole heads as bm rows hold.
int64_t heads_per_tile(const Problem& p, const Config& c);
Kernel build(const Problem& p, const Config& c);
std::vector<ArgSpec> arg_specs(const Problem& p);
std::vector<HostTensor> make_args(const Problem& p, uint64_t seed);
/// fp64 out[b, h0..h0+nh, t0..t0+nt, d0..d0+nd] (row-major), exact softmax.
std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args, int64_t b,
                              int64_t h0, int64_t nh, int64_t t0, int64_t nt, int64_t d0,
                              int64_t nd);

} // namespace tp::ops::decode_attention
