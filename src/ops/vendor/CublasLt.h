// cuBLASLt, loaded with dlopen at run time: the GEMM speed baseline and fallback. Same semantics as
// GemmOp: row-major C[M, N] = op(A) op(B), bf16/f16 in and out, f32 accumulation, layouts nn
// (A [M, K], B [K, N]), nt (B given as [N, K]) and tn (A given as [K, M]). Nothing links against
// cuBLASLt, so the binary starts without it and says what it looked for.
#pragma once
#include <cuda.h>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "ops/Operator.h"
#include "ops/vendor/VendorLibrary.h"
#include "runtime/DeviceBuffer.h"

namespace tp::ops {

/// The cuBLASLt library this process would use: libcublasLt.so.13, then .so.12 (each as a bare
/// name, under $CUDA_HOME/lib64 and /usr/local/cuda/lib64). Needs no GPU. nullopt and the reason
/// (every path tried) when none loads or it lacks an entry point we call.
std::optional<VendorLibrary> cublaslt_library(std::string* why_not = nullptr);

/// Whether a cuBLASLt GEMM can run here: the library loads, a CUDA driver and a GPU are present.
bool cublaslt_available(std::string* why_not = nullptr);

/// User error naming the bad argument when (dtype, layout, M, N, K) is not something
/// CublasLtGemm runs: dtype bf16/f16, layout nn/nt/tn, sizes positive and below 2^31.
void validate_cublaslt_gemm(DType dtype, const std::string& layout, int64_t M, int64_t N,
                            int64_t K);

/// One cuBLASLt handle with a 32 MiB workspace (allocated on first use) and a per-problem cache of
/// the heuristic's algorithm choice. Not thread-safe: use one object per thread.
class CublasLtGemm {
public:
  /// Hopper kernels want up to 32 MiB of workspace; more buys nothing measurable.
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  /// Loads cuBLASLt, makes the device's primary context current and creates the handle. User
  /// error saying what is missing when cublaslt_available() would be false.
  CublasLtGemm();
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  /// C = op(A) op(B) on device pointers, enqueued on `stream`. Pointers must be aligned to the
  /// element size; wider alignment lets cuBLASLt pick faster kernels (it is part of the cache
  /// key). Errors name the cuBLASLt call and status.
  void run(DType dtype, const std::string& layout, int64_t M, int64_t N, int64_t K, CUdeviceptr A,
           CUdeviceptr B, CUdeviceptr C, CUstream stream = nullptr);
  /// The same for a GemmOp problem (keys M, N, K, option layout).
  void run(const Problem& p, CUdeviceptr A, CUdeviceptr B, CUdeviceptr C,
           CUstream stream = nullptr);

  /// The heuristic's choice for a problem, e.g. "algo 66, tile 128x256, stages 4, workspace 0 B,
  /// waves 0.97", computing it if needed (no GEMM runs).
  std::string algorithm(DType dtype, const std::string& layout, int64_t M, int64_t N, int64_t K);

  const VendorLibrary& library() const { return library_; }

  struct Plan; // matmul + layout descriptors and the chosen algorithm for one problem

private:
  using Key = std::tuple<DType, std::string, int64_t, int64_t, int64_t, int>; // .., alignment
  Plan& plan(DType dtype, const std::string& layout, int64_t M, int64_t N, int64_t K,
             int alignment);

  VendorLibrary library_;
  void* handle_ = nullptr; // cublasLtHandle_t
  rt::DeviceBuffer workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

} // namespace tp::ops
