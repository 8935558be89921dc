// Lowering of copy and fill: register fragments in their layout (runs of adjacent elements as
// vector accesses), whole 16-bit tiles between global and shared memory in 16-byte chunks
// (LowerChunkCopies.cpp), any other memory-to-memory copy as a cooperative loop over the box;
// out-of-bounds global reads as zero and out-of-bounds global writes dropped.
#include "ir/CopyShape.h"
#include "ir/KnownDivisor.h"
#include "passes/CopyElements.h"
#include "passes/LowerContext.h"
#include "passes/LowerTileOps.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

namespace {

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

/// The lanes of a segment that hold adjacent 16-byte runs of one global row, each run 16 bytes
/// past the previous lane's: a blocked (or cols) layout's thread columns, min(tn, 32) of them
/// (tn is a power of two). 0 when a thread's runs are not 16 bytes or no two lanes share a row.
int row_segment(const FragmentLayout& l, int vec, DType g) {
  const bool columns =
      l.kind == FragmentLayout::Kind::blocked || l.kind == FragmentLayout::Kind::cols;
  if (!columns || l.tn < 2 || vec * dtype_bytes(g) != 16) return 0;
  return std::min(l.tn, 32);
}

/// Runs of `vec` adjacent registers of a blocked-family fragment and `vec` adjacent elements of
/// a global tensor's row, moved as one vector access (tp::cg::ld_vec / st_vec pick 16, 8, 4 bytes
/// or elements by the address at run time) when the whole run is inside the tensor and its row
/// is contiguous; element by element, with the bounds guards, otherwise.
/// Loads issue in one loop over the runs and are taken into registers in a second
/// (tp::cg::ld_issue, ld_take): a run's data is used only after every run's load is in flight.
/// Where a warp's adjacent lanes hold adjacent 16-byte runs of a row (row_segment), they move
/// the runs together (tp/tile/row_lanes.cuh): an unaligned row as whole aligned blocks.
ir::Stmt vector_fragment_copy(LowerContext& cx, const ir::Copy* op, int vec) {
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
  const int lanes = row_lanes_allowed(cx, load) ? row_segment(l, vec, g.buffer->dtype) : 0;
  const std::string n_l = n + ", " + std::to_string(lanes);
  if (lanes > 0)
    copy_note(cx, op,
              "16-byte runs of " + std::to_string(lanes) +
                  " lanes together: an unaligned row moves as aligned blocks, shared by shuffles");
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
    Expr slack = read_slack(cx, g, idx_end);
    // A segment's lanes all make the call, each saying whether its run is whole; a lane whose run
    // is not moves its elements alone, after.
    auto together = [&](const std::string& f, std::vector<Expr> args, ir::Stmt alone) {
      args.push_back(full);
      ir::Stmt c = call("tp::cg::" + f + "_lanes<" + n_l + ">", args);
      return alone.defined() ? seq({c, if_then(!full, alone)}) : c;
    };
    ir::Stmt body;
    if (phase == Phase::issue) {
      body = lanes ? together("ld_issue", {rawp, gptr, slack}, {})
                   : if_then(full, call("tp::cg::ld_issue<" + n + ">", {rawp, gptr, slack}));
    } else if (phase == Phase::take || phase == Phase::load) {
      ir::Stmt one = unrolled_for(
          e, vec, ir::Store::make(cx.reg(frag), l.reg_index(re), read(cx, src, ce), {}));
      const bool take = phase == Phase::take;
      if (lanes)
        body = take ? together("ld_take", {rptr, rawp, gptr}, one)
                    : together("ld_vec", {rptr, gptr, slack}, one);
      else
        body = if_then(full,
                       take ? call("tp::cg::ld_take<" + n + ">", {rptr, rawp, gptr})
                            : call("tp::cg::ld_vec<" + n + ">", {rptr, gptr, slack}),
                       one);
    } else {
      ir::Stmt one =
          unrolled_for(e, vec, write(cx, dst, ce, ir::Load::make(cx.reg(frag), l.reg_index(re))));
      body = lanes ? together("st_vec", {gptr, rptr}, one)
                   : if_then(full, call("tp::cg::st_vec<" + n + ">", {gptr, rptr}), one);
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
  if (ir::Stmt s = lower_chunk_copy(cx, op); s.defined()) return s;
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
  if (ir::Stmt s = lower_chunk_copy_async(cx, op); s.defined()) return s;
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
