// TMA store planning: which accumulator-to-global copies of a warp-specialized sm_90a kernel
// leave through shared memory and TMA instead of one global store per register pair.
//
// A store from registers writes each pair of an accumulator row on its own: a warp's store
// touches eight rows' 16-byte pieces, and a 128 x 256 tile takes 512 such warp stores. On an
// H100 the plain GEMM at 4096^3 ran 0.193 ms with its epilogue and 0.159 ms with the same
// epilogue skipped (bench_gemm_epilogue, 2026-12-06): the stores cost 18 % of the kernel.
// Staged, the consumers write each 64-column chunk of the tile into a 128-byte-swizzled shared
// buffer (conflict-free 4-byte stores), and one thread hands the chunk to TMA, which writes
// whole rows and drops what lies outside the tensor. Two chunk buffers alternate, so the
// consumers fill one while TMA reads the other.
//
// A copy qualifies when all of this holds (else `note` says why the first candidate did not):
//   - the kernel is warp-specialized with TMA (the consumers have their own barrier), and does
//     not say `annotate("tma_stores", "0")`;
//   - the copy is a whole wgmma accumulator (f32) into a 16-bit global tensor, the fragment's
//     columns along the tensor's contiguous dimension and its rows along one other dimension,
//     columns a multiple of 64 and at most 256 rows (a TMA box);
//   - it is not in the pipelined loop, and it is the kernel's only access to that tensor (the
//     store completes asynchronously: nothing in the kernel may read it or write it again);
//   - the launch allows it (Target::tma_store_params: 16-byte aligned rows and base);
//   - the two chunk buffers fit in shared memory beside everything else.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "passes/InferLayouts.h"
#include "passes/Target.h"

namespace tp::passes {

struct PipelinePlan;

/// One accumulator copy stored through shared memory by TMA, a column chunk at a time.
struct TmaStore {
  const ir::Copy* copy = nullptr;
  int param = -1;           // kernel parameter index of the global tensor
  std::vector<int64_t> box; // box extents, innermost first: chunk_cols, then the outer extents
  int64_t rows = 0;         // accumulator rows (the box's rows)
  int64_t chunk_cols = 0;   // 128 bytes of the tensor's element type
  int64_t chunks = 0;       // column chunks of the accumulator
  /// The chunk buffers are unused before this store runs: it is the kernel's first TMA store,
  /// in no loop, and the kernel is not persistent (which loops over tiles). Its first two
  /// chunks then need not wait for an earlier store's reads.
  bool first_use = false;
  int64_t chunk_bytes() const { return rows * 128; }
};

/// Sets plan.stores (the copies that qualify by the rules above, kept when their chunk buffers
/// fit in shared memory beside everything else), plan.tma_store_candidates (every parameter
/// that would qualify on a launch allowing it: what a launch checks to choose its variant) and
/// plan.store_note (why the first other copy did not).
void plan_tma_stores(const ir::KernelNode& k, const LayoutInfo& layouts, const Target& t,
                     PipelinePlan& plan);

} // namespace tp::passes
