// Lowering of copy and fill: register fragments element by element in their layout, memory to
// memory as a cooperative loop over the box (16-byte vectors global -> shared when aligned),
// out-of-bounds global reads as zero and out-of-bounds global writes dropped.
#include "ir/CopyShape.h"
#include "ir/KnownDivisor.h"
#include "passes/LowerContext.h"
#include "passes/LowerTileOps.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

namespace {

std::vector<int> nonunit(const std::vector<int64_t>& ext) {
  std::vector<int> d;
  for (size_t i = 0; i < ext.size(); ++i)
    if (ext[i] != 1) d.push_back(static_cast<int>(i));
  return d;
}

/// The full index into region r's buffer of the element at squeezed coordinates `c`.
std::vector<Expr> place(const LowerContext& cx, const ir::Region& r, const std::vector<Expr>& c) {
  std::vector<int> nu = nonunit(r.extent);
  internal_assert(nu.size() == c.size()) << "copy coordinates do not match the box";
  std::vector<Expr> idx;
  size_t k = 0;
  for (size_t d = 0; d < r.extent.size(); ++d) {
    Expr m = lower_expr(cx, r.min[d]);
    idx.push_back(r.extent[d] == 1 ? m : m + c[k++]);
  }
  return idx;
}

/// Copy coordinates `c` over `from`, the squeezed extents of the copy's other side, as
/// coordinates of region r: the element at the same row-major position (ir/CopyShape.h, as the
/// interpreter pairs them). The same coordinates when the two sides' extents agree.
std::vector<Expr> onto(const ir::Region& r, const std::vector<Expr>& c,
                       const std::vector<int64_t>& from) {
  internal_assert(c.size() == from.size()) << "copy coordinates do not match their extents";
  return ir::regroup(c, from, r.squeezed());
}

/// Load of one element of region r (zero when out of bounds of a global tensor).
Expr read(const LowerContext& cx, const ir::Region& r, const std::vector<Expr>& c) {
  std::vector<Expr> idx = place(cx, r, c);
  Expr v = cx.load(r.buffer, idx);
  if (r.buffer->scope == Scope::global) {
    // The zero must have the element's kind: a float 0.0 would turn an integer copy into a
    // float one, rounding every word above 2^24.
    Expr zero = is_float(r.buffer->dtype) ? Expr(0.0) : Expr(0);
    v = ir::Select::make(cx.global_in_bounds(r.buffer, idx), v, zero);
  }
  return v;
}

ir::Stmt write(const LowerContext& cx, const ir::Region& r, const std::vector<Expr>& c,
               const Expr& v) {
  std::vector<Expr> idx = place(cx, r, c);
  ir::Stmt s = cx.store(r.buffer, idx, v);
  if (r.buffer->scope == Scope::global) s = if_then(cx.global_in_bounds(r.buffer, idx), s);
  return s;
}

/// Coordinates of a register r of layout l, as the fragment's own (i, j) or (i).
std::vector<Expr> coords(const LowerContext& cx, const FragmentLayout& l, const Expr& r) {
  return l.coords(cx.tid, r);
}

/// The copy coordinates of a whole fragment's element: its coordinates without the fragment's
/// unit dimensions (a [1, N] fragment copies as a row of N).
std::vector<Expr> squeezed(const ir::Buffer& frag, const std::vector<Expr>& c) {
  std::vector<int64_t> s = frag->const_shape();
  std::vector<Expr> out;
  for (size_t d = 0; d < c.size(); ++d)
    if (s[d] != 1) out.push_back(c[d]);
  return out;
}

/// s, executed only for registers that hold an element of the tile.
ir::Stmt when_valid(const LowerContext& cx, const FragmentLayout& l, const Expr& r, ir::Stmt s) {
  Expr ok = l.valid(cx.tid, r);
  return ok.defined() ? if_then(ok, s) : s;
}

/// Whether the 16 - E bytes after a run ending at `idx_end` belong to tensor g, so that an
/// unaligned run may be loaded as the whole aligned 16-byte blocks holding it (ld_vec's
/// `slack`): further along the row, or a next row exists (the bytes past a row's end are the
/// next row's, or its padding in the same allocation). The last run of a tensor's last row takes
/// the narrower loads.
Expr read_slack(const LowerContext& cx, const ir::Region& g, const std::vector<Expr>& idx_end) {
  const ir::Buffer& b = g.buffer;
  std::vector<Expr> along = idx_end;
  along.back() = along.back() + (16 / dtype_bytes(b->dtype) - 1);
  Expr slack = cx.global_in_bounds(b, along);
  if (idx_end.size() >= 2) {
    std::vector<Expr> next = idx_end;
    next[next.size() - 2] = next[next.size() - 2] + 1;
    next.back() = Expr(0);
    slack = slack || cx.global_in_bounds(b, next);
  }
  return slack;
}

/// Runs of `vec` adjacent registers of a blocked-family fragment and `vec` adjacent elements of
/// a global tensor's row, moved as one vector access (tp::cg::ld_vec / st_vec pick 16, 8, 4 bytes
/// or elements by the address at run time) when the whole run is inside the tensor and its row
/// is contiguous; element by element, with the bounds guards, otherwise.
/// Loads issue in one loop over the runs and are taken into registers in a second
/// (tp::cg::ld_issue, ld_take): a run's data is used only after every run's load is in flight.
ir::Stmt vector_fragment_copy(const LowerContext& cx, const ir::Copy* op, int vec) {
  const ir::Region &src = op->src, &dst = op->dst;
  bool load = src.buffer->scope == Scope::global;
  const ir::Region& g = load ? src : dst;
  const ir::Buffer& frag = load ? dst.buffer : src.buffer;
  const FragmentLayout& l = cx.layouts.fragment(frag);
  const int runs = static_cast<int>(l.regs_per_thread() / vec);
  const std::string n = std::to_string(vec);
  // kRawWords<B> of tp/tile/codegen.cuh: a run's loaded bytes (B / 4 + 4 words) and offset.
  const int words = vec * dtype_bytes(g.buffer->dtype) / 4 + 5;
  const bool together = load && cx.layouts.loads_together(op);
  Buffer raw = together ? ir::make_buffer(frag->name + "_raw", Scope::local, DType::i32,
                                          {Expr(runs * words)}, 0, op->loc)
                        : Buffer();
  enum class Phase { issue, take, load, store };
  // One loop over the thread's runs, doing `phase` for each.
  auto over_runs = [&](Phase phase) {
    Var q("q"), e("e");
    Expr r0 = q * vec;
    std::vector<Expr> c0 = squeezed(frag, coords(cx, l, r0));
    std::vector<Expr> idx = place(cx, g, c0);
    std::vector<Expr> idx_end = idx;
    idx_end.back() = idx_end.back() + (vec - 1);
    Expr full = cx.global_in_bounds(g.buffer, idx) && cx.global_in_bounds(g.buffer, idx_end);
    if (cx.strided(g.buffer)) full = full && cx.inner_contiguous(g.buffer);
    Expr gptr = call_expr("tp.ptr", {cx.global_index(g.buffer, idx)}, DType::i32, {g.buffer});
    Expr rptr = call_expr("tp.ptr", {r0}, DType::i32, {cx.reg(frag)});
    Expr rawp = raw ? call_expr("tp.ptr", {q * words}, DType::i32, {raw}) : Expr();
    Expr re = r0 + e;
    std::vector<Expr> ce = squeezed(frag, coords(cx, l, re));
    ir::Stmt body;
    if (phase == Phase::issue) {
      body = if_then(full,
                     call("tp::cg::ld_issue<" + n + ">", {rawp, gptr, read_slack(cx, g, idx_end)}));
    } else if (phase == Phase::take || phase == Phase::load) {
      ir::Stmt one = ir::Store::make(cx.reg(frag), l.reg_index(re), read(cx, src, ce), {});
      ir::Stmt fast = phase == Phase::take ? call("tp::cg::ld_take<" + n + ">", {rptr, rawp, gptr})
                                           : call("tp::cg::ld_vec<" + n + ">",
                                                  {rptr, gptr, read_slack(cx, g, idx_end)});
      body = if_then(full, fast, unrolled_for(e, vec, one));
    } else {
      ir::Stmt one = write(cx, dst, ce, ir::Load::make(cx.reg(frag), l.reg_index(re)));
      body =
          if_then(full, call("tp::cg::st_vec<" + n + ">", {gptr, rptr}), unrolled_for(e, vec, one));
      if (Expr w = l.owner(cx.tid); w.defined()) body = if_then(w, body);
    }
    return unrolled_for(q, runs, when_valid(cx, l, r0, body));
  };
  if (!load) return over_runs(Phase::store);
  if (!together) return over_runs(Phase::load); // LayoutInfo::loads_together says why
  return seq({ir::Allocate::make(raw, {}), over_runs(Phase::issue), over_runs(Phase::take)});
}

/// The run length for reading a whole shared tile into a whole blocked-family fragment of the
/// same shape as vector loads (tp::cg::lds_vec), or 0 when it must go element by element. A
/// run of `vec` registers holds `vec` adjacent elements of one tile row, starting at a multiple
/// of vec; it is one access when its bytes are at most 16 and every row keeps that alignment
/// (a linear row pitch that is a multiple of it; a swizzle moves whole 16-byte chunks).
/// The same rule for writing a whole blocked-family fragment into a whole shared tile of its
/// shape (tp::cg::sts_vec): `shared` is the tile's side, `frag` the fragment's.
int shared_run(const LowerContext& cx, const ir::Copy* op, const Buffer& shared,
               const Buffer& frag) {
  if (shared->scope != Scope::shared || !cx.layouts.in_shared(shared) ||
      !cx.layouts.in_registers(frag) || !ir::is_whole(op->src) || !ir::is_whole(op->dst) ||
      shared->rank() > 2 || shared->const_shape() != frag->const_shape())
    return 0;
  const FragmentLayout& l = cx.layouts.fragment(frag);
  if (!l.elementwise() || l.kind == FragmentLayout::Kind::rows || l.vec < 2) return 0;
  const int bytes = static_cast<int>(l.vec) * dtype_bytes(shared->dtype);
  if (bytes != 4 && bytes != 8 && bytes != 16) return 0;
  const SharedLayout& sl = cx.layouts.shared_layout(shared);
  const int64_t pitch = (sl.cols + sl.pad) * sl.elem_bytes;
  if (sl.kind == SharedLayout::Kind::linear ? pitch % bytes != 0 : sl.swizzle_bytes % 16 != 0)
    return 0;
  return static_cast<int>(l.vec);
}
int shared_read_vector(const LowerContext& cx, const ir::Copy* op) {
  return shared_run(cx, op, op->src.buffer, op->dst.buffer);
}
int shared_write_vector(const LowerContext& cx, const ir::Copy* op) {
  return shared_run(cx, op, op->dst.buffer, op->src.buffer);
}

/// Runs of `vec` registers of a whole fragment and its whole shared tile, one access a run:
/// tp::cg::lds_vec into the fragment, tp::cg::sts_vec out of it (element by element, a warp's
/// 2-byte accesses took one instruction an element).
ir::Stmt shared_vector_copy(const LowerContext& cx, const ir::Copy* op, int vec) {
  const bool into_shared = op->dst.buffer->scope == Scope::shared;
  const ir::Region& shared = into_shared ? op->dst : op->src;
  const Buffer& frag = into_shared ? op->src.buffer : op->dst.buffer;
  const FragmentLayout& l = cx.layouts.fragment(frag);
  Var q("q");
  Expr r0 = q * vec;
  std::vector<Expr> idx = place(cx, shared, squeezed(frag, coords(cx, l, r0)));
  Expr sptr =
      call_expr("tp.ptr", {cx.shared_index(shared.buffer, idx)}, DType::i32, {shared.buffer});
  Expr rptr = call_expr("tp.ptr", {r0}, DType::i32, {cx.reg(frag)});
  const std::string n = std::to_string(vec);
  ir::Stmt access = into_shared ? call("tp::cg::sts_vec<" + n + ">", {sptr, rptr})
                                : call("tp::cg::lds_vec<" + n + ">", {rptr, sptr});
  // A replicated fragment is stored by one thread of each replica set.
  if (Expr w = l.owner(cx.tid); into_shared && w.defined()) access = if_then(w, access);
  return unrolled_for(q, static_cast<int>(l.regs_per_thread() / vec),
                      when_valid(cx, l, r0, access));
}

/// A register's place in a region of its fragment: whether the register's element lies in the
/// region, and its squeezed coordinates within the region (the copy's coordinates). A thread
/// holds registers inside and outside any region, so region copies guard each register.
struct InRegion {
  Expr inside;
  std::vector<Expr> coords;
};
InRegion in_region(const LowerContext& cx, const ir::Region& r, const std::vector<Expr>& fc) {
  internal_assert(fc.size() == r.extent.size()) << "fragment coordinates of " << r.buffer->name;
  InRegion out;
  for (size_t d = 0; d < fc.size(); ++d) {
    Expr rel = fc[d] - lower_expr(cx, r.min[d]);
    Expr c = rel >= 0 && rel < Expr(r.extent[d]);
    out.inside = out.inside.defined() ? (out.inside && c) : c;
    if (r.extent[d] != 1) out.coords.push_back(rel);
  }
  return out;
}

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
Chunks shared_chunks(const ir::Copy* op) {
  const ir::Region &src = op->src, &dst = op->dst;
  const Buffer &S = src.buffer, &D = dst.buffer;
  if (D->scope != Scope::shared || S->scope != Scope::global || S->dtype != D->dtype ||
      dtype_bytes(S->dtype) != 2 || dst.extent != D->const_shape())
    return {};
  // The chunks walk the tile's rows; the source's outer dimensions may be regrouped into them
  // (the copy rule): a chunk stays within one row of both.
  std::vector<int64_t> ds = D->const_shape(), dsq = dst.squeezed();
  bool two_d = D->rank() == 2 && dsq.size() == 2;
  bool one_d = D->rank() == 1 && dsq.size() == 1;
  if (!(two_d || one_d) || src.extent.back() != ds.back() || ds.back() % 8 != 0) return {};
  return {two_d ? ds[0] : 1, ds.back(), 16 / dtype_bytes(S->dtype), two_d};
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

/// 16-byte vector copy global -> shared. A chunk inside the tensor whose global run is not
/// 16-byte aligned (rows of odd length) is loaded as the aligned blocks that hold it, shifted
/// into place and stored as one 16-byte chunk (tp::cg::copy16_unaligned); element by element,
/// each of its eight 2-byte loads and stores took its own guard (an odd-sized transpose ran at
/// a third of the copy bandwidth). Chunks at the tensor's edge go element by element.
/// A thread with kLoadsTogetherFromRuns chunks or more issues every chunk's load before it
/// stores any (tp::cg::ld_issue, then st16_taken), as a fragment's runs do: one branch a chunk
/// kept nvcc from hoisting the next chunk's load above this one's store, so a thread had one
/// load in flight at a time.
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
  if (trips < LayoutInfo::kLoadsTogetherFromRuns)
    return for_chunks(cx, ch, [&](Expr row, Expr col) {
      Chunk c = chunk(row, col);
      ir::Stmt fast = call("tp::cg::copy16", {c.sptr, c.gptr});
      ir::Stmt shifted =
          if_then(c.whole_run, call("tp::cg::copy16_unaligned", {c.sptr, c.gptr, c.slack}),
                  chunk_elements(cx, ch, src, dst, row, col));
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
    return if_then(c.whole_run, call("tp::cg::ld_issue<" + n + ">", {rawp(v), c.gptr, c.slack}));
  });
  ir::Stmt take = for_chunks(cx, ch, [&](Expr row, Expr col, Expr v) {
    Chunk c = chunk(row, col);
    return if_then(c.whole_run, call("tp::cg::st16_taken", {c.sptr, rawp(v), c.gptr}),
                   chunk_elements(cx, ch, src, dst, row, col));
  });
  return seq({ir::Allocate::make(raw, {}), issue, take});
}

/// The chunks of a shared -> global copy of a whole 16-bit tile that the global side can take
/// as aligned 16-byte blocks (block_store): the shape rules of shared_chunks, mirrored, and
/// shared rows that start on 16-byte chunks (a swizzle moves whole chunks; a padded linear
/// pitch must stay a multiple of 8 elements).
Chunks global_blocks(const LowerContext& cx, const ir::Copy* op) {
  const ir::Region &src = op->src, &dst = op->dst;
  const Buffer &S = src.buffer, &D = dst.buffer;
  if (S->scope != Scope::shared || D->scope != Scope::global || S->dtype != D->dtype ||
      dtype_bytes(S->dtype) != 2 || src.extent != S->const_shape())
    return {};
  std::vector<int64_t> ss = S->const_shape(), ssq = src.squeezed();
  bool two_d = S->rank() == 2 && ssq.size() == 2;
  bool one_d = S->rank() == 1 && ssq.size() == 1;
  if (!(two_d || one_d) || dst.extent.back() != ss.back() || ss.back() % 8 != 0) return {};
  const SharedLayout& sl = cx.layouts.shared_layout(S);
  if (sl.kind == SharedLayout::Kind::linear && (sl.cols + sl.pad) % 8 != 0) return {};
  return {two_d ? ss[0] : 1, ss.back(), 8, two_d};
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
  return strided_for(cx, ch.rows * blocks, [&](Expr v) {
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
    Expr c = lo + e;
    ir::Stmt one = if_then(c >= 0 && c < Expr(ch.cols),
                           write(cx, dst, onto(dst, chunk_coords(ch, row, c), ch.shape()),
                                 read(cx, src, chunk_coords(ch, row, c))));
    ir::Stmt b = if_then(whole, fast, unrolled_for(e, per, one));
    b = ir::Let::make(lo, k * per - o, b);
    b = ir::Let::make(o, call_expr("tp::cg::elems_into16<2>", {gptr(Expr(0))}, DType::i32), b);
    b = ir::Let::make(k, v % blocks, b);
    return ir::Let::make(row, v / blocks, b);
  });
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

/// Accumulator registers 2q and 2q+1 of a thread hold adjacent columns of one row. Storing an
/// accumulator to a global row-major tile can then write both with one 4-byte (16-bit types) or
/// 8-byte (f32) store, which halves the epilogue's store instructions.
bool paired_store_applies(const LowerContext& cx, const ir::Copy* op) {
  const ir::Region &src = op->src, &dst = op->dst;
  if (!cx.layouts.fragment(src.buffer).adjacent_column_pairs()) return false;
  if (dst.buffer->scope != Scope::global || dst.buffer->rank() < 1) return false;
  // The fragment's column must run along the tensor's contiguous (last) dimension.
  std::vector<int> nu = nonunit(dst.extent);
  if (nu.size() != 2 || nu[1] != static_cast<int>(dst.extent.size()) - 1) return false;
  DType t = dst.buffer->dtype;
  bool wide = t == DType::bf16 || t == DType::f16 || t == DType::f32;
  return wide && src.buffer->dtype == DType::f32;
}

ir::Stmt paired_store(LowerContext& cx, const ir::Copy* op) {
  const ir::Region &src = op->src, &dst = op->dst;
  const FragmentLayout& l = cx.layouts.fragment(src.buffer);
  Var q("q");
  Expr r0 = q * 2, r1 = q * 2 + 1;
  std::vector<Expr> c0 = coords(cx, l, r0);
  std::vector<Expr> idx = place(cx, dst, c0);
  std::vector<Expr> idx1 = idx;
  idx1.back() = idx1.back() + 1;
  Expr flat = cx.global_index(dst.buffer, idx);
  Expr v0 = ir::Load::make(cx.reg(src.buffer), l.reg_index(r0));
  Expr v1 = ir::Load::make(cx.reg(src.buffer), l.reg_index(r1));
  ir::Stmt fast =
      call("tp::cg::store2", {call_expr("tp.ptr", {flat}, DType::i32, {dst.buffer}), v0, v1});
  if (int p = cx.param_index(dst.buffer); p >= 0 && p < 64) cx.paired_params |= uint64_t{1} << p;
  // Rows of even length from an aligned base and a column known even: the pair is aligned and
  // its second element is in bounds whenever its first is, so one test of the first suffices
  // and the store needs no test of its address.
  if (cx.even_rows(dst.buffer) && ir::known_multiple_of(idx.back(), 2)) {
    ir::Stmt aligned = call("tp::cg::store2_aligned",
                            {call_expr("tp.ptr", {flat}, DType::i32, {dst.buffer}), v0, v1});
    return unrolled_for(q, l.regs_per_thread() / 2,
                        if_then(cx.global_in_bounds(dst.buffer, idx), aligned));
  }
  // Both in bounds and the pair's first element aligned for the wide store (even row length,
  // even column); otherwise element by element, dropping what is out of bounds.
  Expr both = cx.global_in_bounds(dst.buffer, idx1) && flat % 2 == 0;
  if (cx.strided(dst.buffer)) both = both && cx.inner_contiguous(dst.buffer);
  ir::Stmt slow = seq({write(cx, dst, c0, v0), write(cx, dst, coords(cx, l, r1), v1)});
  return unrolled_for(q, l.regs_per_thread() / 2, if_then(both, fast, slow));
}

} // namespace

ir::Stmt lower_copy(LowerContext& cx, const ir::Copy* op) {
  const ir::Region &src = op->src, &dst = op->dst;
  const Buffer &S = src.buffer, &D = dst.buffer;
  bool sreg = cx.layouts.in_registers(S), dreg = cx.layouts.in_registers(D);
  Var r("r");
  const bool swhole = ir::is_whole(src), dwhole = ir::is_whole(dst);
  if (D->scope == Scope::local && sreg)
    user_error(op->loc) << "copy from register fragment '" << S->name << "' to local tile '"
                        << D->name << "': every thread holds all of a local tile but only some "
                        << "of the fragment; copy the fragment through a shared tile";
  if (sreg && dreg) {
    const FragmentLayout &ls = cx.layouts.fragment(S), &ld = cx.layouts.fragment(D);
    if (!ls.same_as(ld))
      user_error(op->loc) << "copy from fragment '" << S->name << "' (" << ls.str() << ") to '"
                          << D->name << "' (" << ld.str()
                          << "): the register layouts differ; copy through a shared tile";
    ir::Stmt s =
        ir::Store::make(cx.reg(D), ls.reg_index(r), ir::Load::make(cx.reg(S), ls.reg_index(r)), {});
    if (!swhole || !dwhole) {
      // Register to register moves stay within a thread: only a region at the same place in
      // both fragments can be copied that way.
      bool same = src.extent == dst.extent;
      for (size_t d = 0; same && d < src.min.size(); ++d)
        same = src.min[d].as_int() && dst.min[d].as_int() &&
               *src.min[d].as_int() == *dst.min[d].as_int();
      if (!same)
        user_error(op->loc) << "copy of a region of register fragment '" << S->name
                            << "' to a different region of '" << D->name
                            << "': that moves elements between threads; copy through a shared "
                               "tile";
      s = if_then(in_region(cx, src, coords(cx, ls, r)).inside, s);
    }
    return unrolled_for(r, ls.regs_per_thread(), s);
  }
  if (const TmaStore* ts = cx.plan.store_for(op)) return lower_tma_store(cx, op, *ts);
  if (sreg && swhole && paired_store_applies(cx, op)) return paired_store(cx, op);
  if (auto it = cx.layouts.copy_vector.find(op); it != cx.layouts.copy_vector.end())
    return vector_fragment_copy(cx, op, it->second);
  if (sreg) {
    if (int vec = shared_write_vector(cx, op)) return shared_vector_copy(cx, op, vec);
    const FragmentLayout& l = cx.layouts.fragment(S);
    Expr v = ir::Load::make(cx.reg(S), l.reg_index(r));
    ir::Stmt s;
    if (swhole) {
      std::vector<Expr> c = l.elementwise() ? squeezed(S, coords(cx, l, r)) : coords(cx, l, r);
      s = write(cx, dst, src.squeezed() == dst.squeezed() ? c : onto(dst, c, src.squeezed()), v);
    } else {
      // Exactly the region: registers outside it are not stored.
      InRegion in = in_region(cx, src, coords(cx, l, r));
      s = if_then(in.inside, write(cx, dst, onto(dst, in.coords, src.squeezed()), v));
    }
    // A replicated vector is stored by one thread of each replica set.
    if (Expr w = l.owner(cx.tid); w.defined()) s = if_then(w, s);
    return unrolled_for(r, l.regs_per_thread(), when_valid(cx, l, r, s));
  }
  if (dreg) {
    if (int vec = shared_read_vector(cx, op)) return shared_vector_copy(cx, op, vec);
    const FragmentLayout& l = cx.layouts.fragment(D);
    if (dwhole) {
      std::vector<Expr> c = l.elementwise() ? squeezed(D, coords(cx, l, r)) : coords(cx, l, r);
      if (src.squeezed() != dst.squeezed()) c = onto(src, c, dst.squeezed());
      return unrolled_for(
          r, l.regs_per_thread(),
          when_valid(cx, l, r, ir::Store::make(cx.reg(D), l.reg_index(r), read(cx, src, c), {})));
    }
    // Exactly the region: registers outside it keep their values.
    InRegion in = in_region(cx, dst, coords(cx, l, r));
    return unrolled_for(
        r, l.regs_per_thread(),
        when_valid(
            cx, l, r,
            if_then(in.inside,
                    ir::Store::make(cx.reg(D), l.reg_index(r),
                                    read(cx, src, onto(src, in.coords, dst.squeezed())), {}))));
  }
  // Memory to memory.
  std::vector<int64_t> ext;
  for (int d : nonunit(src.extent))
    ext.push_back(src.extent[d]);
  if (Chunks ch = shared_chunks(op)) return vector_copy(cx, ch, src, dst);
  if (Chunks ch = global_blocks(cx, op)) return block_store(cx, ch, src, dst);
  int64_t n = 1;
  for (int64_t e : ext)
    n *= e;
  // Into a local tile: every thread holds all of it, so every thread copies every element.
  return element_for(cx, n, D->scope == Scope::local, [&](Expr e) {
    std::vector<Expr> c(ext.size());
    int64_t stride = 1;
    for (int d = static_cast<int>(ext.size()) - 1; d >= 0; --d) {
      c[d] = (e / stride) % ext[d];
      stride *= ext[d];
    }
    return write(cx, dst, onto(dst, c, ext), read(cx, src, c));
  });
}

ir::Stmt lower_copy_async(LowerContext& cx, const ir::Copy* op) {
  if (Chunks ch = shared_chunks(op)) return async_chunks(cx, ch, op->src, op->dst);
  // Not in whole chunks (a dtype conversion, a region, another element size): a synchronous
  // copy into the same stage, ordered before every use by the same wait and barrier.
  return lower_copy(cx, op);
}

ir::Stmt lower_fill(LowerContext& cx, const ir::Fill* op) {
  const ir::Region& dst = op->dst;
  Expr v = lower_expr(cx, op->value);
  Var r("r");
  if (cx.layouts.in_registers(dst.buffer)) {
    const FragmentLayout& l = cx.layouts.fragment(dst.buffer);
    ir::Stmt s = ir::Store::make(cx.reg(dst.buffer), l.reg_index(r), v, {});
    // A region of the fragment: registers outside it keep their values.
    if (!ir::is_whole(dst)) s = if_then(in_region(cx, dst, coords(cx, l, r)).inside, s);
    return unrolled_for(r, l.regs_per_thread(), s);
  }
  std::vector<int64_t> ext;
  for (int d : nonunit(dst.extent))
    ext.push_back(dst.extent[d]);
  int64_t n = 1;
  for (int64_t e : ext)
    n *= e;
  return element_for(cx, n, dst.buffer->scope == Scope::local, [&](Expr e) {
    std::vector<Expr> c(ext.size());
    int64_t stride = 1;
    for (int d = static_cast<int>(ext.size()) - 1; d >= 0; --d) {
      c[d] = (e / stride) % ext[d];
      stride *= ext[d];
    }
    return write(cx, dst, c, v);
  });
}

} // namespace tp::passes
