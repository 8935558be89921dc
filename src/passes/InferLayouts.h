// Layout inference for the CUDA backend. gemm fixes its accumulator's layout (wgmma on sm_90a,
// mma.sync on sm_80); parallel loops, copies and reductions propagate it to the fragments they
// touch element-wise (row vectors get the accumulator's row layout). Every other fragment gets
// a blocked register layout (Layout.h) chosen for 16-byte global accesses, propagated the same
// way; a fragment whose uses need another thread's registers (indexed other than element-wise,
// read outside a parallel loop, a gemm operand, ...) lives in shared memory instead, and
// LayoutInfo::shared_reason says why. Conflicting accumulator layouts are user errors naming
// both buffers. Shared tiles that feed the tensor cores get swizzled layouts.
#pragma once
#include <map>
#include <set>

#include "ir/IR.h"
#include "passes/Layout.h"
#include "passes/Target.h"

namespace tp::passes {

enum class GemmKind {
  wgmma_ss, // sm_90a, A and B from shared memory descriptors
  wgmma_rs, // sm_90a, A from registers (a fragment in the accumulator layout)
  mma,      // sm_80 mma.sync, A and B from shared memory through ldmatrix
  mma_rs,   // sm_80 mma.sync, A from registers (a fragment in the accumulator layout)
  simt,     // plain FMA loops over shared memory (any dtype, any shape)
};
const char* gemm_kind_name(GemmKind k);

struct LayoutInfo {
  int consumer_threads = 0;
  std::map<uint64_t, FragmentLayout> fragments; // register-resident fragments
  std::set<uint64_t> promoted;                  // fragments that live in shared memory
  std::map<uint64_t, SharedLayout> shared;      // every shared-memory buffer, promoted included
  std::map<const ir::Gemm*, GemmKind> gemms;
  /// Fragments kept in shared memory, with the use that keeps them there.
  std::map<uint64_t, std::string> shared_reason;
  /// Shared tiles whose layout ChooseSharedSwizzles picked, and what it saves.
  std::map<uint64_t, std::string> shared_note;
  /// Reductions of blocked fragments whose output elements span warps: their f32 scratch tile.
  std::map<const ir::Reduce*, ir::Buffer> reduce_scratch;
  /// Copies between a global tensor and a blocked-family fragment that move runs of adjacent
  /// elements as vectors: elements per run (the layout's vec). At run time a run at the
  /// tensor's edge or at an address not aligned to 16 bytes takes 8-, 4-byte or scalar accesses.
  std::map<const ir::Copy*, int> copy_vector;

  /// Whether a vector copy from global memory into a fragment issues all of a thread's runs
  /// before it uses any (LowerCopy.cpp's two phases): from kLoadsTogetherFromRuns runs a thread.
  /// Measured on the H200 (2026-12-02): four runs a thread gained 28-48 %; two runs a K step
  /// lost 26 % to the staging registers. Fewer runs load one call each.
  static constexpr int kLoadsTogetherFromRuns = 3;
  bool loads_together(const ir::Copy* c) const;

  bool in_registers(const ir::Buffer& b) const { return fragments.count(b->uid) > 0; }
  /// Shared tiles and promoted fragments: memory every consumer thread can see.
  bool in_shared(const ir::Buffer& b) const;
  const FragmentLayout& fragment(const ir::Buffer& b) const;
  const SharedLayout& shared_layout(const ir::Buffer& b) const;
};

LayoutInfo infer_layouts(const ir::KernelNode& k, const Target& t);

/// The register fragments a parallel loop's body touches, as the lowering reads them.
struct ParallelFragments {
  /// The first register fragment indexed by all of the loop's variables, in order: the loop's
  /// iterations follow its layout (each thread runs its own registers' elements).
  ir::Buffer anchor;
  ir::Buffer any_register;  // the first register fragment accessed at all
  ir::Buffer local_written; // the first local tile the body stores into
};
ParallelFragments parallel_fragments(const LayoutInfo& layouts, const ir::Parallel* p);

/// The blocked layout a fragment of `shape` gets on its own: runs of 16 bytes of the narrowest
/// global dtype it is copied with (`global_bytes`), as many threads along the row as divide it.
FragmentLayout choose_blocked(const std::vector<int64_t>& shape, int global_bytes, int threads);
/// Registers (elements) per thread above which a fragment stays in shared memory.
constexpr int kMaxFragmentRegs = 128;
/// Registers (elements) per thread of all register fragments of a kernel together, above which
/// the largest blocked fragments go to shared memory.
constexpr int kMaxKernelFragmentRegs = 192;

/// The layout table, for `tilepilot show --stage lowered`.
std::string to_string(const ir::KernelNode& k, const LayoutInfo& info);

} // namespace tp::passes
