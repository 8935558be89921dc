// fp32 references on the GPU, for checking kernels at sizes where the fp64 CPU reference is too
// slow. Plain hand-written CUDA C++ compiled with NVRTC (jit_load) at first use: simple and
// obviously correct before fast. They share no code with the kernels they check (not even the
// device library), and outputs are f32 so that only the inputs are rounded.
#pragma once
#include <cuda.h>
#include <string>
#include <vector>

#include "ops/reference/AttentionDesc.h"

namespace tp::ops {

/// C[M, N] (f32, row-major) = op(A) op(B) with f32 accumulation; A and B are bf16/f16 in
/// GemmOp's layouts: nn (A [M, K], B [K, N]), nt (B [N, K]), tn (A [K, M]). Enqueued on `stream`.
void gpu_reference_gemm(DType dtype, const std::string& layout, int64_t M, int64_t N, int64_t K,
                        CUdeviceptr A, CUdeviceptr B, CUdeviceptr C_f32, CUstream stream = nullptr);

/// Unfused attention with AttentionOp's semantics (see AttentionDesc): scores in f32, a two-pass
/// exact softmax (row max first, then exp and sum; no rescaling), O = P V. Q, K, V are read with
/// the description's strides; `p.o` receives f32 [B, H, S, D] *contiguous* (desc.o_stride is
/// ignored) and `p.lse` f32 [B, H, S] when desc.lse. Rows with no valid key give O = 0 and
/// LSE = -inf. D must be a multiple of 16, at most 256.
void gpu_reference_attention(const AttentionDesc& d, const AttentionPtrs& p,
                             CUstream stream = nullptr);

/// Compiles every reference kernel (both dtypes) for `arch` through NVRTC without a GPU, for CI;
/// returns "ref_gemm bf16", ... UserError with NVRTC's log when one fails.
std::vector<std::string> compile_gpu_references(const std::string& arch);

/// `count` f32 values at `src`, copied to the host (synchronous).
std::vector<float> download_f32(CUdeviceptr src, size_t count);

/// `count` bf16/f16/f32 values at `src`, copied to the host and widened to float (exactly).
std::vector<float> download_as_f32(CUdeviceptr src, size_t count, DType dtype);

} // namespace tp::ops
