// Lowering of gemm: wgmma on sm_90a (A and B from swizzled shared tiles through matrix
// descriptors, or A from registers in the accumulator layout), plain FMA loops otherwise.
#include "passes/LowerContext.h"
#include "passes/LowerTileOps.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

namespace {

const char* cuda_type(DType t) {
  return t == DType::bf16 ? "tp::bf16" : "tp::half";
}

/// Shared address (bytes) of element offset `elems` of a shared tile in the current stage.
Expr smem_addr(const LowerContext& cx, const Buffer& b, const Expr& byte_off) {
  const SmemPlan::Slot& s = cx.smem.slot(b);
  auto it = cx.stage.find(b->uid);
  Expr stage_off = it == cx.stage.end() ? Expr(0) : it->second * s.stage_bytes;
  return call_expr("tp.smem_addr", {Expr(s.offset) + stage_off + byte_off}, DType::i32);
}

/// A wgmma descriptor (as an expression) for an operand tile.
/// `mn_major`: the tile's contiguous dimension is M (or N); else K is contiguous.
/// `mn0`: first M/N index the operand covers; `k0`: first K index.
Expr descriptor(const LowerContext& cx, const Buffer& tile, bool mn_major, const Expr& mn0,
                int64_t k0) {
  const SharedLayout& l = cx.layouts.shared_layout(tile);
  internal_assert(l.hardware_swizzle())
      << "wgmma operand " << tile->name << " is not swizzled as wgmma reads (" << l.str() << ")";
  int sw = l.swizzle_bytes, eb = l.elem_bytes;
  int64_t cc = l.chunk_cols(), rows = l.rows;
  int layout_type = sw == 128 ? 1 : sw == 64 ? 2 : 3;
  Expr off;
  int64_t lbo, sbo = 8 * sw;
  if (!mn_major) {
    // Tile [MN, K]: chunk of K columns, then MN rows of `sw` bytes.
    off = Expr((k0 / cc) * rows * sw) + mn0 * sw + Expr((k0 % cc) * eb);
    lbo = 16;
  } else {
    // Tile [K, MN]: chunks of MN columns, K rows each.
    off = (mn0 / cc) * (rows * sw) + Expr(k0 * sw);
    lbo = rows * sw;
  }
  return call_expr("tp::cg::desc<" + std::to_string(layout_type) + ", " + std::to_string(lbo) +
                       ", " + std::to_string(sbo) + ">",
                   {smem_addr(cx, tile, off)}, DType::i32);
}

ir::Stmt lower_wgmma(LowerContext& cx, const ir::Gemm* op, bool rs) {
  const Buffer &A = op->a.buffer, &B = op->b.buffer, &C = op->c.buffer;
  const FragmentLayout& lc = cx.layouts.fragment(C);
  const Buffer& acc = cx.reg(C);
  int64_t N = lc.N, K = op->trans_a ? op->a.extent[0] : op->a.extent[1];
  int P = lc.slabs;
  Expr wg = cx.tid / 128;
  std::string T = cuda_type(A->dtype);
  std::vector<ir::Stmt> s;
  for (int p = 0; p < P; ++p)
    s.push_back(call("tp::warpgroup::fence_operand",
                     {call_expr("tp.regrow", {Expr(p)}, DType::f32, {acc})}));
  s.push_back(call("tp::warpgroup::fence"));
  for (int p = 0; p < P; ++p) {
    Expr m0 = (wg * P + p) * 64;
    for (int64_t kk = 0; kk < K / 16; ++kk) {
      Expr scale = kk != 0                      ? Expr(1)
                   : op->clear                  ? Expr(0)
                   : cx.first_scale_d.defined() ? cx.first_scale_d
                                                : Expr(1);
      Expr db = descriptor(cx, B, !op->trans_b, Expr(0), kk * 16);
      Expr d = call_expr("tp.regrow", {Expr(p)}, DType::f32, {acc});
      if (!rs) {
        Expr da = descriptor(cx, A, op->trans_a, m0, kk * 16);
        s.push_back(call("tp::cg::wgmma_ss<" + T + ", " + std::to_string(N) + ", " +
                             std::to_string(op->trans_a ? 1 : 0) + ", " +
                             std::to_string(op->trans_b ? 0 : 1) + ">",
                         {d, da, db, scale}));
      } else {
        const FragmentLayout& la = cx.layouts.fragment(A);
        const int64_t r0 = p * (la.N / 2) + kk * 8;
        std::vector<Expr> regs;
        Expr a;
        if (auto pk = cx.packed_a.find(A->uid); pk != cx.packed_a.end()) {
          for (int q = 0; q < 4; ++q)
            regs.push_back(ir::Load::make(pk->second, {Expr(r0 / 2 + q)}));
          a = call_expr("tp::cg::u4", regs, DType::i32);
        } else {
          for (int q = 0; q < 8; ++q)
            regs.push_back(call_expr(
                "tp.raw", {ir::Load::make(cx.reg(A), la.reg_index(Expr(r0 + q)))}, A->dtype));
          a = call_expr("tp::cg::pack_a", regs, DType::i32);
        }
        s.push_back(call("tp::cg::wgmma_rs<" + T + ", " + std::to_string(N) + ", " +
                             std::to_string(op->trans_b ? 0 : 1) + ">",
                         {d, a, db, scale}));
      }
    }
  }
  s.push_back(call("tp::warpgroup::commit_group"));
  if (cx.after_commit.defined()) {
    s.push_back(cx.after_commit);
    cx.after_commit = ir::Stmt();
  }
  s.push_back(call("tp::warpgroup::wait_group<" + std::to_string(cx.wgmma_in_flight) + ">"));
  for (int p = 0; p < P; ++p)
    s.push_back(call("tp::warpgroup::fence_operand",
                     {call_expr("tp.regrow", {Expr(p)}, DType::f32, {acc})}));
  return seq(s);
}

/// sm_80: per k16 step, ldmatrix the warp's A and B fragments from the swizzled tiles (or take A
/// from registers), then one mma.sync m16n8k16 per (m16, n8) atom of the warp's tile.
ir::Stmt lower_mma(LowerContext& cx, const ir::Gemm* op, bool rs) {
  const Buffer &A = op->a.buffer, &B = op->b.buffer, &C = op->c.buffer;
  const FragmentLayout& lc = cx.layouts.fragment(C);
  int64_t M = lc.M, N = lc.N, K = op->trans_a ? op->a.extent[0] : op->a.extent[1];
  int64_t WM = M / lc.warps_m, WN = N / lc.warps_n, AM = WM / 16, AN = WN / 8;
  int eb = dtype_bytes(B->dtype);
  std::string T = cuda_type(B->dtype);
  Expr lane = cx.tid % 32, warp = cx.tid / 32;
  Expr m0 = (warp / lc.warps_n) * WM, n0 = (warp % lc.warps_n) * WN;
  Expr q = lane / 8, rr = lane % 8;
  Buffer af = ir::make_buffer("afrag", Scope::local, DType::i32, {Expr(AM), Expr(4)}, 0, op->loc);
  Buffer bf = ir::make_buffer("bfrag", Scope::local, DType::i32, {Expr(AN), Expr(2)}, 0, op->loc);
  auto addr = [&](const Buffer& tile, Expr row, Expr col) {
    const SharedLayout& l = cx.layouts.shared_layout(tile);
    return smem_addr(cx, tile, l.offset(row, col) * eb);
  };
  std::vector<ir::Stmt> s = {ir::Allocate::make(af, {}), ir::Allocate::make(bf, {})};
  if (op->clear) {
    Var r("r");
    s.push_back(unrolled_for(r, lc.regs_per_thread(),
                             ir::Store::make(cx.reg(C), {Expr(r)}, Expr(0.0), {})));
  }
  for (int64_t kk = 0; kk < K / 16; ++kk) {
    if (!rs)
      for (int64_t am = 0; am < AM; ++am) {
        Expr row, col;
        if (!op->trans_a) {
          row = m0 + am * 16 + rr + (q % 2) * 8;
          col = Expr(kk * 16) + (q / 2) * 8;
        } else {
          row = Expr(kk * 16) + rr + (q / 2) * 8;
          col = m0 + am * 16 + (q % 2) * 8;
        }
        s.push_back(
            call(op->trans_a ? "tp::cg::ldsm_x4_t" : "tp::cg::ldsm_x4",
                 {call_expr("tp.regrow", {Expr(am)}, DType::i32, {af}), addr(A, row, col)}));
      }
    for (int64_t an = 0; an < AN; ++an) {
      Expr l16 = lane % 16;
      Expr row, col;
      if (op->trans_b) { // B stored [N, K]
        row = n0 + an * 8 + l16 % 8;
        col = Expr(kk * 16) + (l16 / 8) * 8;
      } else { // B stored [K, N]
        row = Expr(kk * 16) + l16 % 8 + (l16 / 8) * 8;
        col = n0 + an * 8;
      }
      s.push_back(call(op->trans_b ? "tp::cg::ldsm_x2" : "tp::cg::ldsm_x2_t",
                       {call_expr("tp.regrow", {Expr(an)}, DType::i32, {bf}), addr(B, row, col)}));
    }
    for (int64_t am = 0; am < AM; ++am)
      for (int64_t an = 0; an < AN; ++an) {
        Expr a;
        if (rs) {
          // A's accumulator-layout registers of k16 step kk: atoms (am, 2kk) and (am, 2kk + 1).
          const FragmentLayout& la = cx.layouts.fragment(op->a.buffer);
          int64_t an_a = la.N / 8;
          std::vector<Expr> regs;
          for (int h = 0; h < 2; ++h)
            for (int e = 0; e < 4; ++e)
              regs.push_back(call_expr(
                  "tp.raw", {ir::Load::make(cx.reg(A), {Expr((am * an_a + 2 * kk + h) * 4 + e)})},
                  A->dtype));
          // pack_a wants (row g: k 2q..2q+1), (row g+8), (row g, k+8), (row g+8, k+8).
          a = call_expr("tp::cg::pack_a",
                        {regs[0], regs[1], regs[2], regs[3], regs[4], regs[5], regs[6], regs[7]},
                        DType::i32);
        } else {
          a = call_expr("tp::cg::frag4", {call_expr("tp.regrow", {Expr(am)}, DType::i32, {af})},
                        DType::i32);
        }
        s.push_back(call("tp::cg::mma16816<" + T + ", " + std::to_string((am * AN + an) * 4) + ">",
                         {call_expr("tp.buf", {}, DType::f32, {cx.reg(C)}), a,
                          call_expr("tp.regrow", {Expr(an)}, DType::i32, {bf})}));
      }
  }
  return seq(s);
}

/// C[i, j] (+)= sum_k op(A)[i, k] op(B)[k, j] with every operand in shared memory.
ir::Stmt lower_simt_gemm(LowerContext& cx, const ir::Gemm* op) {
  for (const ir::Region* r : {&op->a, &op->b, &op->c})
    if (cx.layouts.in_registers(r->buffer))
      user_error(op->loc) << "gemm: operand '" << r->buffer->name << "' is in registers ("
                          << cx.layouts.fragment(r->buffer).str()
                          << ") but this gemm runs as a plain loop over shared memory on "
                          << cx.target.arch << "; use shared tiles for its operands";
  std::vector<int64_t> cs = op->c.extent;
  int64_t M = cs[0], N = cs[1];
  int64_t K = op->trans_a ? op->a.extent[0] : op->a.extent[1];
  Buffer acc = ir::make_buffer("acc", Scope::local, DType::f32, {Expr(1)}, 0, op->loc);
  auto at = [&](const ir::Region& r, Expr x, Expr y) {
    std::vector<Expr> idx = {lower_expr(cx, r.min[0]) + x, lower_expr(cx, r.min[1]) + y};
    return cx.load(r.buffer, idx);
  };
  // A local accumulator is whole in every thread: every thread computes all of it.
  return element_for(cx, M * N, op->c.buffer->scope == Scope::local, [&](Expr e) {
    Var i("gi"), j("gj"), k("gk");
    Expr a = op->trans_a ? at(op->a, k, i) : at(op->a, i, k);
    Expr b = op->trans_b ? at(op->b, j, k) : at(op->b, k, j);
    Expr c0 = op->clear ? Expr(0.0) : at(op->c, i, j);
    std::vector<Expr> cidx = {lower_expr(cx, op->c.min[0]) + Expr(i),
                              lower_expr(cx, op->c.min[1]) + Expr(j)};
    ir::Stmt body = seq(
        {ir::Allocate::make(acc, {}), ir::Store::make(acc, {Expr(0)}, c0, {}),
         serial_for(k, Expr(0), Expr(K),
                    ir::Store::make(acc, {Expr(0)}, ir::Load::make(acc, {Expr(0)}) + a * b, {})),
         cx.store(op->c.buffer, cidx, ir::Load::make(acc, {Expr(0)}))});
    return ir::Let::make(i, e / N, ir::Let::make(j, e % N, body));
  });
}

} // namespace

ir::Stmt lower_gemm(LowerContext& cx, const ir::Gemm* op) {
  switch (cx.layouts.gemms.at(op)) {
  case GemmKind::wgmma_ss:
    return lower_wgmma(cx, op, false);
  case GemmKind::wgmma_rs:
    return lower_wgmma(cx, op, true);
  case GemmKind::mma:
    return lower_mma(cx, op, false);
  case GemmKind::mma_rs:
    return lower_mma(cx, op, true);
  case GemmKind::simt:
    return lower_simt_gemm(cx, op);
  }
  return ir::Stmt();
}

} // namespace tp::passes
