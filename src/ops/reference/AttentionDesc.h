// How an attention implementation is called on device buffers: the problem (AttentionOp's
// semantics, see ops/attention/AttentionOp.h), element strides of Q, K, V, O and the device pointers.
// Shared by the GPU fp32 reference, cuDNN attention and the benchmarks.
#pragma once
#include <array>
#include <cuda.h>
#include <string>

#include "ops/Operator.h"

namespace tp::ops {

/// Q and O are [B, H, S, D], K and V [B, Hkv, Skv, D]; head h reads key/value head
/// h / (H / Hkv). Strides are in elements over (b, h, s, d); an all-zero stride array means
/// contiguous. The d stride must be 1.
struct AttentionDesc {
  DType dtype = DType::bf16;
  int64_t B = 1, H = 1, Hkv = 1, S = 1, Skv = 1, D = 128;
  bool causal = false; // bottom-right aligned: key j visible from query i when j <= i + L_b - S
  bool lens = false;   // per-batch key lengths L_b in a device int32[B]; else L_b = Skv
  bool lse = false;    // also write the natural-log log-sum-exp, f32 [B, H, S] contiguous
  double scale = 0;    // 0: 1/sqrt(D)
  std::array<int64_t, 4> q_stride{}, k_stride{}, v_stride{}, o_stride{};

  double effective_scale() const;
  std::array<int64_t, 4> q_strides() const; // resolved: contiguous when q_stride is all zero
  std::array<int64_t, 4> k_strides() const;
  std::array<int64_t, 4> v_strides() const;
  std::array<int64_t, 4> o_strides() const;
  /// "attention bf16 B=2 H=8 Hkv=2 S=77 Skv=128 D=64 causal lens lse scale=0.125": for messages.
  std::string str() const;
  /// A cache key: every field, strides included.
  std::string key() const;
};

struct AttentionPtrs {
  CUdeviceptr q = 0, k = 0, v = 0, o = 0;
  CUdeviceptr lse = 0;  // f32 [B, H, S], when desc.lse
  CUdeviceptr lens = 0; // int32 [B], when desc.lens
};

/// The description of an AttentionOp problem (keys B, H, S, D, Skv, Hkv, causal, lse, option
/// lens), contiguous tensors, default scale.
AttentionDesc attention_desc(const Problem& p);

/// User error, prefixed with `who`, naming the first field that makes `d` malformed: sizes not
/// positive, Hkv not dividing H, dtype not bf16/f16, a d stride other than 1, negative strides.
void validate_attention_desc(const AttentionDesc& d, const char* who);

/// User error when a pointer the description needs (q, k, v, o; lse and lens when asked for) is
/// null.
void validate_attention_ptrs(const AttentionDesc& d, const AttentionPtrs& p, const char* who);

} // namespace tp::ops
