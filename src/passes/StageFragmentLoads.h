// Staging a pipelined loop's fragment loads through shared memory, so that the cp.async
// multistage plan (PlanCpAsync.cpp) can overlap them. A loop that reduces rows of a matrix tile
// (with or without a vector beside it) reads its tiles from global memory straight into register
// fragments; neither shared-memory plan takes such a loop, and run as written each iteration
// waits a full memory latency for its own loads. Here each of the loop's leading
// global->fragment copies becomes a copy into a shared tile (which the cp.async plan issues
// stages - 1 iterations ahead) followed by a copy from that tile into the fragment, as Triton
// stages its loads. Measured on the H200 (docs/perf-log.md, 2026-12-03): lesson 06's kernel at
// 16384 x 8192 ran at 2.72 TB/s serial, 3.25 TB/s staged through shared memory with 3 stages;
// issuing the loads ahead into registers instead ran at 0.99 TB/s (the staging registers halved
// the occupancy that hides the latency in the serial loop).
//
// cp.async moves 16-byte chunks only when a row's chunk is 16-byte aligned in global memory; an
// unaligned chunk is copied synchronously, which made lesson 06's kernel, staged, run at
// 1.08 TB/s at K = 8191 against its serial loop's 2.46. So the loop is versioned on alignment,
// as a compiler versions a loop on a runtime condition: the staged loop runs when every staged
// tensor's rows are 16-byte aligned (its row length, or its outer strides, a multiple of 16
// bytes), the original loop, serial, otherwise. The condition is uniform across the block. Where
// the shapes are constants the pass picks the version itself. The two versions share the
// fragments and so their layouts; at 16383 x 8191 the serial version of lesson 06's kernel at
// [16, 512] tiles ran at 1.45 TB/s against the serial kernel's 2.31 (its A fragment took 8-wide
// runs, for the staged version's reads, where the serial kernel had 4-wide ones), and at
// [16, 256] tiles at the serial kernel's speed.
//
// Each iteration's fragment holds exactly what the original copy gave it (the shared tile has
// the source's dtype, and the copy into the fragment converts as the original did), so the
// interpreter's semantics is unchanged; the interpreter runs the kernel as written.
//
// The kernel asks for it: a loop is staged when its schedule says copies = cp_async and it has
// no copy from global into shared memory (such a loop is the cp.async plan's as it is). With
// copies = automatic the loop is left as it is (serial): staging is not always faster. Measured
// on the H200 (2026-12-03), lesson 06's kernel at 256 threads and 131 registers a thread (8
// warps an SM) ran at 2.55 TB/s staged against 2.80 serial, where at 64 registers it ran at
// 3.53 against 2.73. Further, the loop must be the kernel's only pipelined loop, ask for nothing
// beyond stages >= 2, and have top-level copies from global memory into whole fragments that can
// be issued ahead (IssueAhead.h). A loop that asks for cp.async and has none, or whose rows can
// never be 16-byte aligned, is a user error naming why; one the cp.async plan then refuses is
// the plan's user error (PlanPipeline.cpp).
#pragma once
#include <string>
#include <vector>

#include "ir/IR.h"

namespace tp::passes {

/// What the pass did with one pipelined loop.
struct FragmentStaging {
  SourceLoc loc;                      // the loop's
  int stages = 1;                     // as the loop asked
  std::vector<std::string> fragments; // staged, in body order; empty when not staged
  std::vector<std::string> tensors;   // their sources, whose alignment picks the version
  bool versioned = false;             // a runtime condition picks the version
  std::string reason;                 // why not staged (empty when staged)
};

struct StagedBody {
  ir::Stmt body;                      // the kernel's body, the same Stmt when no loop was staged
  std::vector<FragmentStaging> loops; // every pipelined loop, inner loops first
};

StagedBody stage_fragment_loads(const ir::KernelNode& k);

/// What `show` prints for the loop.
std::string to_string(const FragmentStaging& f);

} // namespace tp::passes
