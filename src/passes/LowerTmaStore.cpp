// Lowering of an accumulator copy planned as a TMA store (PlanTmaStores.h): per 64-column
// chunk, the consumers write their register pairs into one of two 128-byte-swizzled chunk
// buffers (straight-line, one 4-byte store a pair) and one thread hands the chunk to TMA.
//
//   for each chunk c (buffer c % 2):
//     thread 0: wait until at most one bulk group still reads (the one of chunk c - 1), so the
//               group that last read this buffer (chunk c - 2, or an earlier store's) is done
//     consumer barrier
//     (both skipped for the first two chunks of a store whose buffers nothing used before:
//     then the element-wise work before the copy can run into the first writes)
//     every consumer: its pairs of the chunk, 4 bytes each, into the buffer (conflict-free: a
//                     warp's eight rows land in eight different 16-byte bank groups)
//     fence.proxy.async + consumer barrier (the writes are visible to TMA's async proxy)
//     thread 0: TMA store of the chunk's box, commit
//   thread 0: wait until TMA has read every chunk (the block's shared memory may be reused)
//
// TMA drops the parts of a box outside the tensor, as the copy's semantics drop out-of-bounds
// writes, so the edge tiles need no guards. The global writes complete after the kernel has
// moved on; PlanTmaStores only takes copies whose tensor nothing else in the kernel touches.
#include "passes/LowerContext.h"
#include "passes/LowerTileOps.h"

namespace tp::passes {

namespace {

/// A constant the IR folded `e` to (the layout's expressions at a constant thread and register).
int64_t constant(const Expr& e) {
  const int64_t* v = e.as_int();
  internal_assert(v) << "TMA store: a layout expression did not fold to a constant";
  return *v;
}

} // namespace

ir::Stmt lower_tma_store(LowerContext& cx, const ir::Copy* op, const TmaStore& s) {
  const ir::Region& dst = op->dst;
  const FragmentLayout& l = cx.layouts.fragment(op->src.buffer);
  const ir::Buffer& regs = cx.reg(op->src.buffer);
  const SharedLayout chunk = SharedLayout::swizzled(s.rows, s.chunk_cols, 2);
  internal_assert(chunk.swizzle_bytes == 128 && chunk.chunk_cols() == s.chunk_cols &&
                  cx.smem.store_staging >= 0)
      << "TMA store chunks of " << dst.buffer->name;
  const int64_t tmap = static_cast<int64_t>(cx.plan.loads.size() + (&s - cx.plan.stores.data()));
  const std::string elem = dst.buffer->dtype == DType::bf16 ? "tp::bf16" : "tp::half";
  const int rank = dst.buffer->rank();
  const Expr issuer = Expr(cx.tid) == 0;
  // Every pair of a thread lies a constant number of rows (a multiple of 8) and 8-column groups
  // from the thread's first pair, whose column is below 8: so its byte offset in a 128-byte
  // swizzled chunk (16-byte group g of row i at (g ^ i % 8) * 16) is a per-thread part plus
  // (drow * 128 + ((dcol / 8) ^ srow) * 16), srow = the first pair's row % 8. Checked on sample
  // threads; the generic offset expression kept ~30 index terms live per pair.
  const Expr r_first = l.chunk_pair_reg(s.chunk_cols, 0, Expr(0));
  const Expr row_t = l.row(cx.tid, r_first), col_t = l.col(cx.tid, r_first);
  Var tb("tp_tb"), srow("tp_srow");
  auto at = [&](const Expr& e, int64_t t) {
    return constant(substitute(e, {{ir::as<ir::Variable>(Expr(cx.tid))->uid, Expr(t)}}));
  };
  const int64_t threads = l.threads();
  std::vector<ir::Stmt> out;
  for (int64_t c = 0; c < s.chunks; ++c) {
    const int64_t base = cx.smem.store_staging + (c % 2) * s.chunk_bytes();
    if (c >= 2 || !s.first_use) {
      out.push_back(if_then(issuer, call("tp::sm90::tma_store_wait_read<1>")));
      out.push_back(cx.thread_barrier());
    }
    for (int64_t q = 0; q < l.chunk_pairs(s.chunk_cols); ++q) {
      const Expr r0 = l.chunk_pair_reg(s.chunk_cols, c, Expr(q));
      const int64_t drow = at(l.row(cx.tid, r0), 0) - at(row_t, 0);
      const int64_t dcol = at(l.col(cx.tid, r0), 0) - at(col_t, 0) - c * s.chunk_cols;
      for (int64_t t : {int64_t{0}, int64_t{1}, int64_t{6}, int64_t{37}, threads - 1})
        internal_assert(at(l.row(cx.tid, r0), t) - at(row_t, t) == drow &&
                        at(l.col(cx.tid, r0), t) - at(col_t, t) - c * s.chunk_cols == dcol &&
                        at(col_t, t) >= 0 && at(col_t, t) < 8)
            << "TMA store: register " << at(r0, 0) << " is not a fixed offset from thread " << t
            << "'s first pair";
      internal_assert(drow % 8 == 0 && dcol % 8 == 0 && dcol >= 0 && dcol < s.chunk_cols)
          << "TMA store: a pair off the 8 x 8 grid of the swizzle";
      Expr off = Expr(base + drow * 128) + Expr(tb) +
                 ir::Binary::make(ir::BinOp::bit_xor, Expr(dcol / 8), Expr(srow)) * Expr(16);
      Expr addr = call_expr("tp.smem_addr", {off}, DType::i32);
      Expr v0 = ir::Load::make(regs, l.reg_index(r0));
      Expr v1 = ir::Load::make(regs, l.reg_index(r0 + 1));
      out.push_back(call("tp::cg::sts_pair<" + elem + ">", {addr, v0, v1}));
    }
    out.push_back(cx.barrier());
    std::vector<Expr> args = {call_expr("tp.tmap", {Expr(tmap)}, DType::i32),
                              lower_expr(cx, dst.min[rank - 1]) + Expr(c * s.chunk_cols)};
    for (int d = rank - 2; d >= 0; --d)
      args.push_back(lower_expr(cx, dst.min[d]));
    args.push_back(call_expr("tp.smem_addr", {Expr(base)}, DType::i32));
    out.push_back(
        if_then(issuer, seq({call("tp::sm90::tma_store_" + std::to_string(rank) + "d", args),
                             call("tp::sm90::tma_store_commit")})));
  }
  out.push_back(if_then(issuer, call("tp::sm90::tma_store_wait_read<0>")));
  ir::Stmt body = seq(out);
  body = ir::Let::make(srow, row_t % 8, body);
  return ir::Let::make(tb, row_t * 128 + col_t * 2, body);
}

} // namespace tp::passes
