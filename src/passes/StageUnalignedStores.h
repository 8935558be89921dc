// Staging an element-wise fragment's store through a shared tile where the destination's rows
// may not be 16-byte aligned.
//
// A fragment stores its runs of a row straight to global memory. Where a row starts off a
// 16-byte boundary (a row of 8193 bf16 elements), each 16-byte run straddles two blocks and
// goes out in up to five narrow pieces: on an H100 an element-wise kernel at 8191 x 8193 was
// bound by L2 requests, 41 % of its sectors excessive (docs/perf-log.md, 2026-12-06, g2). Through
// a shared tile, the store is cut where the destination's own 16-byte blocks are (LowerChunkCopies'
// block store): one aligned 16-byte store per block, the blocks cut by the tile's row ends in at
// most four pieces. Measured on an H100 (2026-12-07, d1), a 16 x 256 element-wise tile at
// 8191 x 8193 ran 0.1652 ms staged (82 % of the copy bandwidth) against 0.1784 direct; at 8192^2,
// where rows are aligned, staging lost (89 % against 99 % of the copy, 2026-12-06, k1).
//
// So the store is versioned on alignment, as StageFragmentLoads versions a loop: the direct
// store where every row of the destination starts 16-byte aligned and the tile starts on a
// chunk, the staged one otherwise. Where shapes and offsets are constants the pass picks the
// version itself. The shared tile has the destination's dtype, so the copy into it converts as
// the direct store did and the copy out of it moves bits: the kernel computes what it did.
//
// A copy is staged when
// - it copies a whole element-wise (blocked) fragment of [m, n] into a [m, n] box of a 16-bit
//   global tensor (unit dimensions before it aside), with n a multiple of 8 and n >= 64 (at
//   least eight chunks a row, so the two cut blocks of a row are a small part of its stores),
//   with at most 32 elements a thread (both versions' registers count);
// - it is not inside a pipelined loop (whose stages own the shared memory), the kernel has no
//   gemm (whose tiles and pipeline own it), and the kernel does not read the destination (the
//   block store writes an element from another thread than the one that computed it);
// - the tile fits in kMaxStagedBytes, with the kernel's other shared tiles, so that staging
//   never costs the kernel its occupancy for a store it may not need;
// - the kernel asks for it with annotate("staged_stores", "1"). Off by default
//   (kStagedStoresByDefault): see there.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "passes/InferLayouts.h"
#include "passes/Target.h"

namespace tp::passes {

/// What the pass did with one copy from an element-wise fragment to a global tensor.
struct StoreStaging {
  SourceLoc loc;          // the copy's
  std::string fragment;   // the copy's source
  std::string tensor;     // its destination
  bool staged = false;    // through a shared tile (versioned or not)
  bool versioned = false; // a runtime condition picks direct or staged
  std::string reason;     // why not staged (empty when staged)
};

struct StagedStores {
  ir::Stmt body;                    // the kernel's body, the same Stmt when nothing was staged
  std::vector<StoreStaging> stores; // every candidate copy, in body order
};

/// Shared memory the staged tiles and the kernel's own shared tiles may take together: the
/// default 48 KiB a block gets without opting in.
inline constexpr int64_t kMaxStagedBytes = 48 * 1024;
/// Elements a thread of the fragment may hold (StageUnalignedStores.cpp says why).
inline constexpr int64_t kMaxStagedElementsPerThread = 32;
/// Whether a kernel that does not say annotate("staged_stores", ...) gets the pass. Off: the
/// staged version and its cut-block stores have not yet run on a GPU (every device call of
/// 2026-12-07's fourteenth and fifteenth sessions found no machine), so they are not held to the
/// interpreter there (GpuDifferential's StagedStoresInALoop, GpuUnalignedRows), nor timed
/// against the direct store. Until they are, the operators' kernels keep the direct stores that
/// ran on the GPU; annotate("staged_stores", "1") asks for the pass.
inline constexpr bool kStagedStoresByDefault = false;

/// Infers the kernel's layouts (for the fragments' kinds) only when it has a copy from a
/// fragment into a 16-bit global tensor.
StagedStores stage_unaligned_stores(const ir::KernelNode& k, const Target& t);

/// What `show` prints for the copy.
std::string to_string(const StoreStaging& s);

} // namespace tp::passes
