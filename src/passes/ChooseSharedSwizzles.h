// Bank-conflict-free shared tiles: each shared tile that the kernel's threads read and write
// themselves (not a tensor-core operand, not a TMA box) gets the XOR swizzle of its 16-byte
// units under which one warp's accesses take the fewest shared-memory wavefronts.
//
// A transpose through a shared tile is the case that asks for it: a warp writes rows of the
// tile in 16-byte runs and reads it down its columns, so a linear tile puts the rows a warp
// reads at one time in the same banks (4- to 8-way conflicts, found by ncu in run g2). Padding
// each row would break the 16-byte runs of the writes; XORing a row's unit index with
// (row / period) keeps every run whole and aligned and spreads the rows a column read touches
// over the banks. TileLang and Triton swizzle shared tiles the same way; here the period is
// chosen by counting the wavefronts of the accesses the lowering will emit (warp 0, each
// statement's indices at the first block and iteration), not by a fixed rule.
//
// Correctness does not depend on the choice: every shared access goes through
// SharedLayout::offset, and a swizzle moves whole 16-byte units, so vector accesses stay whole.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"

namespace tp::passes {

/// One warp-wide access to a shared tile: the (row, col) of each taking lane's first element,
/// and the bytes every lane moves (its element, or its vector run).
struct WarpAccess {
  std::vector<std::pair<int64_t, int64_t>> lanes;
  int bytes = 2;
};

/// Warp 0's accesses to shared tile `b`, as LowerTileOps and LowerCopy emit them: element
/// accesses in parallel loops, whole-tile copies to and from global memory (16-byte chunks of
/// 16-bit tiles, else elements) and to and from register fragments (their runs). Accesses whose
/// indices are not known at compile time are left out.
std::vector<WarpAccess> warp_accesses(const ir::KernelNode& k, const LayoutInfo& layouts,
                                      const ir::Buffer& b);

/// Shared-memory wavefronts the accesses take under `sl` (32 banks of 4 bytes; 8- and 16-byte
/// accesses are served a half and a quarter warp at a time).
int64_t wavefronts(const std::vector<WarpAccess>& accesses, const SharedLayout& sl);

/// The wavefronts the accesses would take without any bank conflict: each access's bytes in
/// 128-byte wavefronts.
int64_t conflict_free_wavefronts(const std::vector<WarpAccess>& accesses);

/// Replaces the linear layout of every eligible shared tile whose accesses some swizzle serves
/// in fewer wavefronts (LayoutInfo::shared_note says by how much, and notes conflicts that
/// remain, swizzled or not). Eligible: unpadded, rows of
/// 32 bytes or more in at least two rows, no gemm operand, no TMA load's destination. A kernel
/// annotated `shared_swizzle = 0` keeps every tile linear.
void choose_shared_swizzles(const ir::KernelNode& k, const PipelinePlan& plan, LayoutInfo& layouts);

} // namespace tp::passes
