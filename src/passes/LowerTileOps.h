// Lowers tile-level IR to per-thread CUDA-level IR: every tile op becomes loops over the
// executing thread's registers or over shared/global elements, wgmma/mma and TMA become
// device-library calls, and a warp-specialized pipeline becomes a producer branch (TMA loads
// into staged buffers, guarded by full/empty mbarriers) and a consumer branch.
#pragma once
#include "passes/LowerContext.h"

namespace tp::passes {

ir::Stmt lower_tile_ops(LowerContext& cx);

/// One statement of the kernel body lowered for the consumer threads (LowerTileOps.cpp).
ir::Stmt lower_stmt(LowerContext& cx, const ir::Stmt& s);

/// The warp-specialized kernel: producer and consumer branches (LowerWarpSpecialized.cpp).
ir::Stmt lower_warp_specialized(LowerContext& cx);

/// The cp.async multistage pipeline: prologue, the loop with its waits and barrier, the drain
/// (LowerCpAsync.cpp). `loop` is cx.plan.loop.
ir::Stmt lower_cp_async_loop(LowerContext& cx, const ir::For* loop);

/// Lowers the element accesses in an expression evaluated by every consumer thread alike (loop
/// bounds, tile offsets): global and shared accesses become flat indices.
Expr lower_expr(const LowerContext& cx, const Expr& e);

} // namespace tp::passes
