// Staging a pipelined loop's fragment loads through shared memory, so that the cp.async
// multistage plan (PlanCpAsync.cpp) can overlap them. A GEMV or a row reduction reads its tiles
// from global memory straight into register fragments; neither shared-memory plan takes such a
// loop, and run as written each iteration waits a full memory latency for its own loads. Here
// each of the loop's leading global->fragment copies becomes a copy into a shared tile (which the
// cp.async plan issues stages - 1 iterations ahead) followed by a copy from that tile into the
// fragment, as Triton stages its loads. Measured on the H200 (docs/perf-log.md, 2026-12-03):
// 16384 x 8192 GEMV 2.72 TB/s serial, 3.25 TB/s staged through shared memory with 3 stages;
// issuing the loads ahead into registers instead ran at 0.99 TB/s (the staging registers halved
// the occupancy that hides the latency in the serial loop).
//
// cp.async moves 16-byte chunks only when a row's chunk is 16-byte aligned in global memory; an
// unaligned chunk is copied synchronously, which made a staged GEMV at K = 8191 run at 1.08 TB/s
// against its serial loop's 2.46. So the loop is versioned on alignment, as a compiler versions a
// loop on a runtime condition: the staged loop runs when every staged tensor's rows are 16-byte
// aligned (its row length, or its outer strides, a multiple of 16 bytes), the original loop,
// serial, otherwise. The condition is uniform across the block. Where the shapes are constants
// the pass picks the version itself.
//
// Each iteration's fragment holds exactly what the original copy gave it (the shared tile has
// the source's dtype, and the copy into the fragment converts as the original did), so the
// interpreter's semantics is unchanged; the interpreter runs the kernel as written.
//
// A loop is staged when all of these hold (otherwise it is left as it is, and the report says
// why):
//   - it is the kernel's only pipelined loop (the cp.async plan takes one);
//   - its schedule asks for stages >= 2 and nothing else (copies = automatic, no ping-pong, no
//     deferred gemm);
//   - no top-level copy of its body goes from global to shared memory (the shared-memory plans
//     take such a loop as it is);
//   - some top-level copy from global memory into a whole fragment can be issued ahead
//     (IssueAhead.h), and its rows can be 16-byte aligned.
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
  ir::Stmt body; // the kernel's body, the same Stmt when no loop was staged
  std::vector<FragmentStaging> loops; // every pipelined loop, inner loops first
};

StagedBody stage_fragment_loads(const ir::KernelNode& k);

/// What `show` prints for the loop.
std::string to_string(const FragmentStaging& f);

} // namespace tp::passes
