// The scaled-dot-product-attention forward graph in cuDNN's backend API, composed of matmul,
// pointwise and reduction nodes in the shape cuDNN's fused flash-attention engines recognise
// (the same composition cudnn-frontend's composite SDPA node lowers to for cuDNN < 9.21):
//
//   S  = matmul(Q, K^T)                       f32, [B, H, S, Skv]; K^T is K with (s, d) strides
//   S *= scale                                pointwise MUL by a by-value f32
//   padded: S = (row < seq_q[b] && col < seq_kv[b]) ? S : -inf     (GEN_INDEX, CMP_LT, AND,
//                                                                    BINARY_SELECT)
//   causal: S = (row + skv - sq >= col) ? S : -inf                 (GEN_INDEX, ADD, SUB, CMP_GE,
//           skv, sq: per-batch tensors when padded, else by-value    BINARY_SELECT)
//   m = max_j S; e = exp(S - m); l = sum_j e; stats = m + log(l)   (REDUCTION, SUB, EXP, LOG,
//   P = e / l in the input dtype                                    ADD, DIV)
//   O = matmul(P, V)
//
// "padded" (per-batch sequence lengths, matmul M/N/K overrides) is used for per-batch key lengths
// and for causal with S > Skv, which cuDNN only accepts in that form. Stats are the natural-log
// log-sum-exp of the scaled scores, exactly AttentionOp's LSE; virtual when not asked for.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/reference/AttentionDesc.h"
#include "ops/vendor/CudnnBackend.h"

namespace tp::ops::cudnn {

/// Unique ids of the graph's non-virtual tensors (the variant pack binds pointers to these).
enum SdpaUid : int64_t {
  kUidQ = 1,
  kUidK,
  kUidV,
  kUidO,
  kUidStats,
  kUidScale,         // by value: f32
  kUidNegInfPadding, // by value: f32 -inf
  kUidNegInfCausal,  // by value: f32 -inf
  kUidSeqQ,          // device int32 [B]: S for every batch (padded only)
  kUidSeqKv,         // device int32 [B]: key lengths (padded only)
  kUidSq,            // by value: int32 S (causal, not padded)
  kUidSkv,           // by value: int32 Skv (causal, not padded)
  kUidFirstVirtual = 100,
};

struct SdpaGraph {
  bool padded = false;
  std::vector<std::unique_ptr<Desc>> parts; // tensors and sub-descriptors the operations use
  std::vector<std::unique_ptr<Desc>> ops;   // finalized, in data-flow order
  // Host storage of the by-value scalars; the variant pack points here.
  float scale = 0, neg_inf = 0;
  int32_t sq = 0, skv = 0;
};

/// True when the graph for `d` needs per-batch sequence-length tensors.
bool sdpa_needs_padding(const AttentionDesc& d);

/// Builds and finalizes every tensor and operation node for `d` (no handle, no GPU needed).
/// `cudnn_version` picks version-dependent details (the mask value). Throws a UserError naming
/// the node cuDNN rejected.
std::unique_ptr<SdpaGraph> build_sdpa_graph(const AttentionDesc& d, size_t cudnn_version);

/// Why cuDNN `cudnn_version` cannot run `d` with this graph, from limits known without a GPU
/// (head dim, version-specific restrictions); "" when none is known. The engine may still refuse.
std::string sdpa_known_limits(const AttentionDesc& d, size_t cudnn_version);

} // namespace tp::ops::cudnn
