// The copies of whole 16-bit tiles between global memory and shared tiles that move 16-byte
// chunks (docs/schedules.md, "Copies through shared tiles"): global -> shared as vector copies
// (aligned, unaligned, every chunk's load issued first) or as cp.async chunks in a pipeline,
// shared -> global in the destination's aligned blocks. Chunks at a tensor's edge go element by
// element.
#include <algorithm>
#include <string>

#include "passes/CopyElements.h"
#include "passes/LowerContext.h"
#include "passes/LowerTileOps.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

namespace {

/// The 16-byte chunks a global -> shared copy of a whole 16-bit tile moves: rows x (cols / per)
/// chunks of `per` elements (rows = 1 for a 1-d tile). One decision for the synchronous copy
/// (vector_copy) and the cp.async one (async_chunks).
struct Chunks {
  int64_t rows = 0, cols = 0, per = 0;
  bool two_d = false;
  explicit operator bool() const { return per > 0; }
  int64_t count() const { return rows * (cols / per); }
  /// The destination tile's squeezed extents, over which chunk_coords are.
  std::vector<int64_t> shape() const { return two_d ? std::vector{rows, cols} : std::vector{cols}; }
};
/// The chunks of a copy between a whole 16-bit shared tile `tile` (either side) and a global
/// region `g`. The chunks walk the tile's rows; the global side's outer dimensions may be
/// regrouped into them (the copy rule): a chunk stays within one row of both.
Chunks whole_tile_chunks(const ir::Region& tile, const ir::Region& g) {
  const Buffer &S = tile.buffer, &G = g.buffer;
  if (S->scope != Scope::shared || G->scope != Scope::global || S->dtype != G->dtype ||
      dtype_bytes(S->dtype) != 2 || tile.extent != S->const_shape())
    return {};
  std::vector<int64_t> ss = S->const_shape(), ssq = tile.squeezed();
  bool two_d = S->rank() == 2 && ssq.size() == 2;
  bool one_d = S->rank() == 1 && ssq.size() == 1;
  if (!(two_d || one_d) || g.extent.back() != ss.back() || ss.back() % 8 != 0) return {};
  return {two_d ? ss[0] : 1, ss.back(), 16 / dtype_bytes(S->dtype), two_d};
}
Chunks shared_chunks(const ir::Copy* op) {
  return whole_tile_chunks(op->dst, op->src);
}

/// The copy coordinates of chunk element (row, col): (row, col), or (col) for a 1-d tile.
std::vector<Expr> chunk_coords(const Chunks& ch, const Expr& row, const Expr& col) {
  return ch.two_d ? std::vector<Expr>{row, col} : std::vector<Expr>{col};
}

/// for every chunk v of the copy (cooperatively): body(row, col, v) with the chunk's first
/// element.
ir::Stmt for_chunks(const LowerContext& cx, const Chunks& ch,
                    const std::function<ir::Stmt(Expr, Expr, Expr)>& body) {
  return strided_for(cx, ch.count(), [&](Expr v) {
    Var row("vr"), col("vc");
    ir::Stmt b = body(row, col, v);
    b = ir::Let::make(col, (v % (ch.cols / ch.per)) * ch.per, b);
    return ir::Let::make(row, v / (ch.cols / ch.per), b);
  });
}
ir::Stmt for_chunks(const LowerContext& cx, const Chunks& ch,
                    const std::function<ir::Stmt(Expr, Expr)>& body) {
  return for_chunks(cx, ch, [&](Expr row, Expr col, Expr) { return body(row, col); });
}

/// Element by element, with the bounds guards: chunks at the tensor's edge or unaligned.
/// The destination, a whole shared tile, is addressed from the chunk's first element: a chunk is
/// one 16-byte unit, which every shared layout keeps whole (a swizzle moves whole units), so its
/// element e lies e past the first. Addressed element by element instead, a swizzled tile's XOR
/// was recomputed for each element, and nvcc kept an address register for each of a thread's
/// stores (a 128 x 128 transpose over 256 threads: 210 registers against 96 linear).
ir::Stmt chunk_elements(const LowerContext& cx, const Chunks& ch, const ir::Region& src,
                        const ir::Region& dst, const Expr& row, const Expr& col) {
  Var e("ve");
  Expr first = cx.shared_index(dst.buffer, place(cx, dst, chunk_coords(ch, row, col)));
  Expr v = read(cx, src, onto(src, chunk_coords(ch, row, col + e), ch.shape()));
  return unrolled_for(e, ch.per, ir::Store::make(dst.buffer, {first + e}, v, {}));
}

/// The lanes of a segment that take adjacent chunks of one row: chunk v = it * T + tid lies in
/// row v / cpr at chunk v mod cpr (cpr chunks a row), so with T a multiple of 32 and cpr a power
/// of two, lanes of a warp that share a row take adjacent chunks, min(cpr, 32) of them. 0 when
/// no two lanes share a row.
int chunk_lanes(const LowerContext& cx, const Chunks& ch) {
  const int64_t cpr = ch.cols / ch.per, T = cx.consumer_threads();
  if (!row_lanes_allowed(cx, true) || cpr < 2 || T % 32 != 0 || (cpr & (cpr - 1)) != 0) return 0;
  return static_cast<int>(std::min<int64_t>(cpr, 32));
}

/// 16-byte vector copy global -> shared. A chunk inside the tensor whose global run is not
/// 16-byte aligned (rows of odd length) is loaded as the aligned blocks that hold it, shifted
/// into place and stored as one 16-byte chunk (tp::cg::copy16_unaligned); element by element,
/// each of its eight 2-byte loads and stores took its own guard (an odd-sized transpose ran at
/// a third of the copy bandwidth). Chunks at the tensor's edge go element by element.
/// A thread with kLoadsTogetherFromRuns chunks or more issues every chunk's load before it
/// stores any (tp::cg::ld_issue, then st16_taken), as a fragment's runs do: one branch a chunk
/// kept nvcc from hoisting the next chunk's load above this one's store, so a thread had one
/// load in flight at a time. Where adjacent lanes take adjacent chunks of a row (chunk_lanes),
/// an unaligned chunk is loaded by the lanes together (tp/tile/row_lanes.cuh): one aligned block
/// a lane, the second from the next lane by shuffles.
ir::Stmt vector_copy(const LowerContext& cx, const Chunks& ch, const ir::Region& src,
                     const ir::Region& dst) {
  const Buffer& g = src.buffer;
  const SharedLayout& sl = cx.layouts.shared_layout(dst.buffer);
  Expr col0 = lower_expr(cx, src.min.back());
  Expr aligned = cx.rows_aligned(g, ch.per) && (col0 % ch.per == 0);
  struct Chunk {
    Expr sptr, gptr, inside, whole_run, slack;
  };
  auto chunk = [&](Expr row, Expr col) {
    std::vector<Expr> gidx = place(cx, src, onto(src, chunk_coords(ch, row, col), ch.shape()));
    std::vector<Expr> gidx_end = gidx;
    gidx_end.back() = gidx_end.back() + (ch.per - 1);
    Chunk c;
    c.inside = cx.global_in_bounds(g, gidx) && cx.global_in_bounds(g, gidx_end);
    c.whole_run = cx.strided(g) ? (c.inside && cx.inner_contiguous(g)) : c.inside;
    c.sptr = call_expr("tp.ptr", {cx.stage_base(dst.buffer) + sl.offset(row, col)}, DType::i32,
                       {dst.buffer});
    c.gptr = call_expr("tp.ptr", {cx.global_index(g, gidx)}, DType::i32, {g});
    c.slack = read_slack(cx, src, gidx_end);
    return c;
  };
  const int64_t T = cx.consumer_threads(), trips = (ch.count() + T - 1) / T;
  const int lanes = chunk_lanes(cx, ch);
  const std::string L = std::to_string(lanes);
  if (trips < LayoutInfo::kLoadsTogetherFromRuns)
    return for_chunks(cx, ch, [&](Expr row, Expr col) {
      Chunk c = chunk(row, col);
      ir::Stmt fast = call("tp::cg::copy16", {c.sptr, c.gptr});
      ir::Stmt elements = chunk_elements(cx, ch, src, dst, row, col);
      ir::Stmt shifted =
          lanes ? seq({call("tp::cg::copy16_lanes<" + L + ">",
                            {c.sptr, c.gptr, c.slack, c.whole_run}),
                       if_then(!c.whole_run, elements)})
                : if_then(c.whole_run, call("tp::cg::copy16_unaligned", {c.sptr, c.gptr, c.slack}),
                          elements);
      return if_then(aligned && c.inside, fast, shifted);
    });
  // kRawWords<16> of tp/tile/codegen.cuh: a chunk's loaded words and its offset.
  const int words = 16 / 4 + 5;
  Buffer raw = ir::make_buffer(dst.buffer->name + "_raw", Scope::local, DType::i32,
                               {Expr(trips * words)}, 0, src.buffer->loc);
  // Chunk v = it * T + tid is the thread's trip it = v / T (tid < T).
  auto rawp = [&](Expr v) { return call_expr("tp.ptr", {(v / T) * words}, DType::i32, {raw}); };
  const std::string n = std::to_string(ch.per);
  ir::Stmt issue = for_chunks(cx, ch, [&](Expr row, Expr col, Expr v) {
    Chunk c = chunk(row, col);
    if (lanes)
      return call("tp::cg::ld_issue_lanes<" + n + ", " + L + ">",
                  {rawp(v), c.gptr, c.slack, c.whole_run});
    return if_then(c.whole_run, call("tp::cg::ld_issue<" + n + ">", {rawp(v), c.gptr, c.slack}));
  });
  ir::Stmt take = for_chunks(cx, ch, [&](Expr row, Expr col, Expr v) {
    Chunk c = chunk(row, col);
    ir::Stmt elements = chunk_elements(cx, ch, src, dst, row, col);
    if (lanes)
      return seq(
          {call("tp::cg::st16_taken_lanes<" + L + ">", {c.sptr, rawp(v), c.gptr, c.whole_run}),
           if_then(!c.whole_run, elements)});
    return if_then(c.whole_run, call("tp::cg::st16_taken", {c.sptr, rawp(v), c.gptr}), elements);
  });
  return seq({ir::Allocate::make(raw, {}), issue, take});
}

/// The chunks of a shared -> global copy of a whole 16-bit tile that the global side can take
/// as aligned 16-byte blocks (block_store): whole_tile_chunks, and shared rows that start on
/// 16-byte chunks (a swizzle moves whole chunks; a padded linear pitch must stay a multiple of 8
/// elements).
Chunks global_blocks(const LowerContext& cx, const ir::Copy* op) {
  Chunks ch = whole_tile_chunks(op->src, op->dst);
  if (!ch) return {};
  const SharedLayout& sl = cx.layouts.shared_layout(op->src.buffer);
  if (sl.kind == SharedLayout::Kind::linear && (sl.cols + sl.pad) % 8 != 0) return {};
  return ch;
}

/// A shared -> global copy in aligned 16-byte blocks of the destination. Each destination row
/// is cut where its own addresses cross 16-byte boundaries, which need not be on the tile's
/// columns (a row of an odd-width tensor starts anywhere in a block): with the row's first
/// element `o` elements into its block, block k holds tile columns [8k - o, 8k - o + 8), and a
/// row has cols / 8 + 1 of them. A thread takes one block at a time, consecutive threads
/// consecutive blocks: a whole block inside the tile and the tensor is gathered from the two
/// shared chunks that hold it and stored at once (tp::cg::st_block_from_shared); the partial
/// blocks at a row's ends, and blocks past the tensor's edge, go element by element. Element by
/// element throughout, a warp's 2-byte stores were 16 bytes apart, touching each 32-byte sector
/// with eight stores.
ir::Stmt block_store(const LowerContext& cx, const Chunks& ch, const ir::Region& src,
                     const ir::Region& dst) {
  const Buffer& g = dst.buffer;
  const SharedLayout& sl = cx.layouts.shared_layout(src.buffer);
  const int64_t per = ch.per, blocks = ch.cols / per + 1;
  auto one_block = [&](Expr v) {
    Var row("vr"), k("vk"), o("vo"), lo("vlo"), e("ve");
    auto gidx = [&](const Expr& col) {
      return place(cx, dst, onto(dst, chunk_coords(ch, row, col), ch.shape()));
    };
    auto gptr = [&](const Expr& col) {
      return call_expr("tp.ptr", {cx.global_index(g, gidx(col))}, DType::i32, {g});
    };
    auto sptr = [&](const Expr& col) {
      return call_expr("tp.ptr", {cx.stage_base(src.buffer) + sl.offset(row, col)}, DType::i32,
                       {src.buffer});
    };
    std::vector<Expr> first = gidx(lo), last = gidx(lo + (per - 1));
    Expr whole = lo >= 0 && lo + per <= Expr(ch.cols) && cx.global_in_bounds(g, first) &&
                 cx.global_in_bounds(g, last);
    if (cx.strided(g)) whole = whole && cx.inner_contiguous(g);
    Expr chunk = lo / per * per; // lo >= 0 here
    ir::Stmt fast =
        call("tp::cg::st_block_from_shared", {gptr(lo), sptr(chunk), sptr(chunk + per), lo % per});
    // A block cut by the tile's row end (lo < 0: the first, lo + per > cols: the last) holds
    // elements [head, head + count) of the tile's; inside the tensor, it is stored in aligned
    // pieces from the one shared chunk it reads (passed as both chunks, so nothing outside the
    // tile is read; shift + the block's element then falls in the right copy).
    Expr head = ir::Select::make(lo < 0, -lo, Expr(0));
    Expr count = ir::Select::make(lo + per > Expr(ch.cols), Expr(ch.cols) - lo, Expr(per)) - head;
    Expr part_chunk = ir::Select::make(lo < 0, Expr(0), Expr(ch.cols - per));
    Expr inside = cx.global_in_bounds(g, gidx(lo + head)) &&
                  cx.global_in_bounds(g, gidx(lo + head + count - 1));
    if (cx.strided(g)) inside = inside && cx.inner_contiguous(g);
    ir::Stmt part =
        call("tp::cg::st_block_part_from_shared",
             {gptr(lo), sptr(part_chunk), sptr(part_chunk), (lo + per) % per, head, count});
    Expr c = lo + e;
    ir::Stmt one = if_then(c >= 0 && c < Expr(ch.cols),
                           write(cx, dst, onto(dst, chunk_coords(ch, row, c), ch.shape()),
                                 read(cx, src, chunk_coords(ch, row, c))));
    ir::Stmt b =
        if_then(whole, fast, if_then(count > 0 && inside, part, unrolled_for(e, per, one)));
    b = ir::Let::make(lo, k * per - o, b);
    b = ir::Let::make(o, call_expr("tp::cg::elems_into16<2>", {gptr(Expr(0))}, DType::i32), b);
    b = ir::Let::make(k, v % blocks, b);
    return ir::Let::make(row, v / blocks, b);
  };
  // Rolled: unrolled, its three paths a block (whole, cut, past the tensor's edge) took an
  // element-wise kernel's compile from 0.52 to 0.75 s of CPU (16 x 256 tile, NVRTC 13.0,
  // development machine). A trip reads shared memory and stores one block: no global load to
  // issue ahead.
  return strided_for(cx, ch.rows * blocks, one_block, /*rolled=*/true);
}

/// cp.async copy global -> shared: every chunk is one tp::sm80::cp_async_chunk, which moves the
/// chunk's in-bounds elements with the widest cp.async the global address allows (16, 8, 4
/// bytes; element loads otherwise) and zero-fills the rest of the chunk (src-size below the copy
/// size), so a chunk past the tensor's last column or row reads zeros, as every copy does. A
/// chunk that starts before column 0 (a negative offset) or a tensor whose rows are not
/// contiguous goes element by element.
ir::Stmt async_chunks(const LowerContext& cx, const Chunks& ch, const ir::Region& src,
                      const ir::Region& dst) {
  const Buffer& g = src.buffer;
  const SharedLayout& sl = cx.layouts.shared_layout(dst.buffer);
  const std::string helper = "tp::sm80::cp_async_chunk<" + std::to_string(dtype_bytes(g->dtype)) +
                             ", " + std::to_string(ch.per) + ">";
  return for_chunks(cx, ch, [&](Expr row, Expr col) {
    std::vector<Expr> gidx = place(cx, src, onto(src, chunk_coords(ch, row, col), ch.shape()));
    Expr gcol = gidx.back();
    std::vector<Expr> row_start = gidx;
    row_start.back() = Expr(0);
    Expr rows_ok = cx.global_in_bounds(g, row_start);
    Expr left = g->shape.back() - gcol;
    Expr in_row = ir::Binary::make(ir::BinOp::max, Expr(0),
                                   ir::Binary::make(ir::BinOp::min, Expr(ch.per), left));
    Var valid("vn");
    Expr gptr =
        call_expr("tp.ptr", {ir::Select::make(Expr(valid) > 0, cx.global_index(g, gidx), Expr(0))},
                  DType::i32, {g});
    Expr saddr = cx.stage_base(dst.buffer) + sl.offset(row, col);
    ir::Stmt async =
        call(helper, {call_expr("tp.ptr", {saddr}, DType::i32, {dst.buffer}), gptr, valid});
    async = ir::Let::make(valid, ir::Select::make(rows_ok, in_row, Expr(0)), async);
    Expr simple = !rows_ok || (gcol >= 0 && cx.inner_contiguous(g));
    return if_then(simple, async, chunk_elements(cx, ch, src, dst, row, col));
  });
}

} // namespace

ir::Stmt lower_chunk_copy(LowerContext& cx, const ir::Copy* op) {
  if (Chunks ch = shared_chunks(op)) {
    const int64_t T = cx.consumer_threads(), trips = (ch.count() + T - 1) / T;
    const int lanes = chunk_lanes(cx, ch);
    copy_note(
        cx, op,
        "global -> shared '" + op->dst.buffer->name + "' in 16-byte chunks, " +
            std::to_string(trips) + " a thread" +
            (trips >= LayoutInfo::kLoadsTogetherFromRuns
                 ? ", every chunk's load issued before any is stored"
                 : ", one chunk at a time (fewer than " +
                       std::to_string(LayoutInfo::kLoadsTogetherFromRuns) + " a thread)") +
            (lanes > 0
                 ? "; an unaligned row's chunks load one aligned block a lane, the next lane's "
                   "by shuffles (" +
                       std::to_string(lanes) + " lanes a row)"
                 : "; a chunk of an unaligned row loads the aligned blocks that hold it"));
    return vector_copy(cx, ch, op->src, op->dst);
  }
  if (Chunks ch = global_blocks(cx, op)) {
    copy_note(
        cx, op,
        "shared '" + op->src.buffer->name +
            "' -> global in the destination's aligned 16-byte blocks, gathered from the tile");
    return block_store(cx, ch, op->src, op->dst);
  }
  return {};
}

ir::Stmt lower_chunk_copy_async(LowerContext& cx, const ir::Copy* op) {
  if (Chunks ch = shared_chunks(op)) {
    copy_note(cx, op,
              "global -> shared '" + op->dst.buffer->name +
                  "' as cp.async 16-byte chunks into the pipeline's stages");
    return async_chunks(cx, ch, op->src, op->dst);
  }
  return {};
}

} // namespace tp::passes
