// State shared by the lowering of tile ops into per-thread CUDA-level IR (LowerTileOps.cpp,
// LowerCopy.cpp, LowerChunkCopies.cpp, LowerGemm.cpp, LowerReduce.cpp). Lowered IR uses:
//   - global tensors: Load/Store with one flat element index (row-major, or through the stride
//     parameters of a strided tensor);
//   - shared buffers: Load/Store with one physical element index (layout and stage applied);
//   - register fragments: new local buffers of regs_per_thread elements, indexed by constants
//     inside unrolled loops (wgmma accumulators are [slabs, N/2]);
//   - Evaluate(Intrinsic(...)) for device-library calls, Let for values computed once.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"
#include "passes/PlanSharedMemory.h"
#include "passes/Target.h"

namespace tp::passes {

struct LowerContext {
  const ir::KernelNode& k;
  const Target& target;
  const LayoutInfo& layouts;
  const PipelinePlan& plan;
  const SmemPlan& smem;
  Var tid;                             // threadIdx.x
  std::map<uint64_t, ir::Buffer> regs; // fragment uid -> its register array
  std::map<uint64_t, Expr> stage;      // staged buffer uid -> current stage index
  /// After a pipelined loop of n iterations over `stages` buffers, a staged tile holds its last
  /// iteration's data (the semantics of a copy in a loop): the statements after the loop
  /// address that stage, (n - 1) mod stages, or stage 0 when the loop ran no iteration.
  void stage_after_loop(const std::set<uint64_t>& staged, const Expr& n, int stages);
  bool in_consumer = true;
  /// wgmma groups a lowered gemm leaves in flight (wait_group<N>). 0 except in a warp-specialized
  /// main loop whose only work is one gemm: there the previous stage's group may still run
  /// while the next is issued, and its stage is released one iteration late (LowerTileOps.cpp).
  int wgmma_in_flight = 0;
  /// When defined, the scale-d of each wgmma's first k16 step (0: the accumulator's old value is
  /// ignored). Set for the main loop's gemm when the accumulator's clear is folded into it
  /// (LowerTileOps.cpp): zeroing registers that an in-flight wgmma group accumulates makes ptxas
  /// serialize every wgmma of the kernel (its warning C7515).
  Expr first_scale_d;
  /// When defined, emitted by the next lowered wgmma between its commit and its wait (ping-pong:
  /// the warpgroup hands the tensor cores on once its gemm is issued).
  ir::Stmt after_commit;
  /// A-operand fragment uid -> its registers packed in pairs (one 32-bit word per two 16-bit
  /// elements, word j = elements 2j and 2j+1 of the fragment's register order). Set for the
  /// deferred second gemm (LowerWarpSpecialized.cpp): its A is packed where it is cast, so the next
  /// iteration's wgmma reads ready registers and ptxas issues its k16 steps as one group.
  std::map<uint64_t, ir::Buffer> packed_a;
  /// Bit i: parameter i took a paired fragment store (LowerCopy.cpp); what a launch must
  /// know to pick a variant with Target::even_rows.
  uint64_t paired_params = 0;
  /// Per parallel loop over an accumulator that writes global memory, whether its element
  /// writes were paired and if not why (PairElementWrites.h); `show --stage lowered` prints them.
  std::vector<std::string> write_notes;

  LowerContext(const ir::KernelNode& kn, const Target& t, const LayoutInfo& l,
               const PipelinePlan& p, const SmemPlan& s);

  int consumer_threads() const { return k.threads; }
  /// A barrier among the consumer threads (all threads when not warp-specialized).
  ir::Stmt barrier() const;
  /// The same barrier without the async-proxy fence: for data that only ordinary loads read.
  ir::Stmt thread_barrier() const;
  /// Register array of a register-resident fragment.
  const ir::Buffer& reg(const ir::Buffer& frag) const;
  /// Whether global tensor b is indexed through stride parameters: declared strided, and a
  /// view in the target's launches (Target::view_params).
  bool strided(const ir::Buffer& b) const;
  /// Flat index into a global tensor.
  Expr global_index(const ir::Buffer& b, const std::vector<Expr>& idx) const;
  /// Every row of global tensor b starts `per` elements aligned (given an aligned base) and its
  /// elements are adjacent: the extent for a contiguous tensor, the strides for a strided one.
  Expr rows_aligned(const ir::Buffer& b, int64_t per) const;
  /// Parameter index of global tensor b (-1: not a parameter).
  int param_index(const ir::Buffer& b) const;
  /// Whether the target promises b's rows hold an even number of adjacent elements
  /// (Target::even_rows).
  bool even_rows(const ir::Buffer& b) const;
  /// Elements of one row of b are adjacent (always for contiguous tensors).
  Expr inner_contiguous(const ir::Buffer& b) const;
  /// In-bounds condition of an index into a global tensor.
  Expr global_in_bounds(const ir::Buffer& b, const std::vector<Expr>& idx) const;
  /// Physical element index into a shared buffer (shared tile or promoted fragment); idx has the
  /// buffer's logical rank.
  Expr shared_index(const ir::Buffer& b, const std::vector<Expr>& idx) const;
  /// Element offset of a staged buffer's current stage (0 when not staged).
  Expr stage_base(const ir::Buffer& b) const;
  /// Load/store of logical element idx of any buffer (registers excluded).
  Expr load(const ir::Buffer& b, const std::vector<Expr>& idx) const;
  ir::Stmt store(const ir::Buffer& b, const std::vector<Expr>& idx, const Expr& v) const;
  /// Register access for wgmma accumulators ([slabs][N/2]) and other fragments ([R]).
  Expr reg_load(const ir::Buffer& frag, int r) const;
  ir::Stmt reg_store(const ir::Buffer& frag, int r, const Expr& v) const;
};

/// Helpers to build lowered statements.
ir::Stmt call(const std::string& name, std::vector<Expr> args = {},
              std::vector<ir::Buffer> buffers = {});
Expr call_expr(const std::string& name, std::vector<Expr> args, DType t,
               std::vector<ir::Buffer> buffers = {});
ir::Stmt seq(std::vector<ir::Stmt> s);
ir::Stmt unrolled_for(const Var& v, int64_t n, ir::Stmt body);
ir::Stmt serial_for(const Var& v, Expr min, Expr extent, ir::Stmt body);
ir::Stmt if_then(Expr c, ir::Stmt t, ir::Stmt e = ir::Stmt());
/// for (e = tid; e < n; e += threads): body(e). A cooperative loop over n work items, unrolled
/// up to 8 trips unless `rolled` (a body whose copies would cost more compile time than the
/// unrolling saves at run time).
ir::Stmt strided_for(const LowerContext& cx, int64_t n, const std::function<ir::Stmt(Expr)>& body,
                     bool rolled = false);
/// A loop over n work items: cooperative (strided_for), or every item in every thread when
/// `every_thread` (ops that write a local tile, which each thread holds whole).
ir::Stmt element_for(const LowerContext& cx, int64_t n, bool every_thread,
                     const std::function<ir::Stmt(Expr)>& body);
/// element_for over the row-major index space `extents`, with `vars` (one a dimension, the last
/// innermost) bound to each item's coordinates around `body`.
ir::Stmt index_space_for(const LowerContext& cx, const std::vector<Var>& vars,
                         const std::vector<int64_t>& extents, bool every_thread,
                         const ir::Stmt& body);
/// Replaces variables by expressions.
Expr substitute(const Expr& e, const std::map<uint64_t, Expr>& m);
ir::Stmt substitute(const ir::Stmt& s, const std::map<uint64_t, Expr>& m);

/// Per-op lowerings (LowerCopy.cpp, LowerGemm.cpp, LowerReduce.cpp).
ir::Stmt lower_copy(LowerContext& cx, const ir::Copy* op);
/// A prefetched global->shared copy of a cp.async pipeline, into the stage cx.stage names:
/// cp.async chunks where the copy moves whole 16-byte chunks, else a synchronous copy.
ir::Stmt lower_copy_async(LowerContext& cx, const ir::Copy* op);
/// A copy of a whole 16-bit tile between global memory and a shared tile in 16-byte chunks
/// (LowerChunkCopies.cpp): global -> shared vector copies, shared -> global block stores; adds
/// its plan to cx.write_notes. Undefined when the copy does not move whole chunks.
ir::Stmt lower_chunk_copy(LowerContext& cx, const ir::Copy* op);
/// The same global -> shared copy as cp.async chunks of a pipeline's stage; undefined when the
/// copy does not move whole chunks.
ir::Stmt lower_chunk_copy_async(LowerContext& cx, const ir::Copy* op);
/// An accumulator copy the plan stores by TMA through shared memory (LowerTmaStore.cpp).
ir::Stmt lower_tma_store(LowerContext& cx, const ir::Copy* op, const TmaStore& s);
ir::Stmt lower_fill(LowerContext& cx, const ir::Fill* op);
ir::Stmt lower_gemm(LowerContext& cx, const ir::Gemm* op);
ir::Stmt lower_reduce(LowerContext& cx, const ir::Reduce* op);
/// Element-wise body rewriting shared by parallel loops and copies (LowerTileOps.cpp).
ir::Stmt lower_element_body(LowerContext& cx, const ir::Stmt& body,
                            const std::map<uint64_t, int>& reg_index_of_anchor, int anchor_reg);

} // namespace tp::passes
