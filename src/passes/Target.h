// The CUDA target a kernel is lowered for, and the features lowering may use.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

namespace tp::passes {

struct Target {
  std::string arch = "sm_90a"; // "sm_90a" or "sm_80"
  /// TMA needs every TMA-loaded tensor's row pitch to be a multiple of 16 bytes; launch picks a
  /// variant compiled without TMA when a problem's shapes break that (see codegen/cuda).
  bool allow_tma = true;
  /// False: plan only (a tuner's estimate), and let the caller compare the shared memory it
  /// needs with the device's; true: a kernel over the limit is a user error.
  bool enforce_smem_limit = true;
  /// Bit i set: parameter i (declared strided) is a strided view in this variant's launches
  /// and is indexed through its stride parameters. Clear: it is indexed as a contiguous tensor
  /// (its stride parameters stay in the signature, unread), so contiguous arguments run the
  /// code a contiguous declaration gives, as Triton specializes on unit strides. CudaKernel
  /// picks the variant per launch; lowering elsewhere (show, the tuner) sees contiguous ones.
  uint64_t view_params = 0;
  /// Bit i set: parameter i's rows hold an even number of adjacent elements in this variant's
  /// launches (an even last extent, and for a view also a unit innermost stride and even outer
  /// strides) and its first element is aligned to two elements, so that any element at an even
  /// column starts an aligned pair. A paired fragment store then needs no alignment test and no
  /// element-wise fallback: that branch was a third of a gemm's compile time. CudaKernel sets
  /// the bits of the parameters that take paired stores (LoweredKernel::paired_params) per
  /// launch, from their shapes, strides and addresses; lower_for_shapes assumes aligned bases.
  uint64_t even_rows = 0;
  /// Bit i set: parameter i may be stored by TMA through shared memory (PlanTmaStores.h) in this
  /// variant's launches: its base and row pitch are 16-byte aligned (a view's also a unit
  /// innermost stride). All set by default (lowering for shapes alone assumes aligned bases, as
  /// for even_rows); CudaKernel clears the bits a launch's arguments break.
  uint64_t tma_store_params = ~uint64_t{0};

  bool sm90() const { return arch == "sm_90a"; }
  bool wgmma() const { return sm90(); }
  bool tma() const { return sm90() && allow_tma; }
  /// Largest dynamic shared memory a block may opt into, in bytes.
  int64_t smem_limit() const { return sm90() ? 232448 : 166912; }
  /// What one block may use when `blocks_per_sm` blocks are to share an SM (each block also
  /// costs the SM 1 KiB the hardware reserves), within `stated` when that is set (> 0).
  int64_t smem_limit(int64_t stated, int blocks_per_sm) const {
    const int64_t share = (smem_limit() + 1024) / blocks_per_sm - 1024;
    return stated > 0 ? std::min(stated, share) : share;
  }
  std::string str() const {
    return arch + (sm90() && !allow_tma ? "-notma" : "") +
           (view_params ? "-views" + std::to_string(view_params) : "") +
           (even_rows ? "-even" + std::to_string(even_rows) : "") +
           (~tma_store_params ? "-regstores" + std::to_string(~tma_store_params) : "");
  }
  /// "sm_90a" | "sm_80"; user error naming the choices otherwise.
  static Target parse(const std::string& arch);
};

} // namespace tp::passes
