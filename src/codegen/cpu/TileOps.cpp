// Tile ops of the CPU interpreter: copy, gemm, fill and reduce over whole regions.
#include <cmath>

#include "codegen/cpu/Statements.h"
#include "ir/CopyShape.h"

namespace tp::cpu {

namespace {

/// The dimensions of a region that are not unit-extent, in order: copies pair these up.
std::vector<int> nonunit(const std::vector<int64_t>& ext) {
  std::vector<int> d;
  for (size_t i = 0; i < ext.size(); ++i)
    if (ext[i] != 1) d.push_back(static_cast<int>(i));
  return d;
}

int64_t offset_of(const Storage& s, const std::vector<int64_t>& idx, bool* ok) {
  int64_t off = 0;
  *ok = true;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (idx[d] < 0 || idx[d] >= s.shape[d]) *ok = false;
    off += idx[d] * s.strides[d];
  }
  return off;
}

class CopyS : public CStmt {
public:
  CopyS(const ir::Copy* op, CompileEnv& env)
      : src_(op->src, env, op->loc), dst_(op->dst, env, op->loc), loc_(op->loc) {}
  void exec(Ctx& c) override {
    const Storage& s = *c.buf[src_.slot];
    Storage& d = *c.buf[dst_.slot];
    std::vector<int64_t> so = src_.origin(c, loc_), dor = dst_.origin(c, loc_);
    std::vector<int> sd = nonunit(src_.extent), dd = nonunit(dst_.extent);
    std::vector<int64_t> ext, dext;
    for (int k : sd) ext.push_back(src_.extent[k]);
    for (int k : dd)
      dext.push_back(dst_.extent[k]);
    int64_t total = 1;
    for (int64_t e : ext) total *= e;
    const bool same = ext == dext;
    std::vector<int64_t> e(ext.size(), 0), si = so, di = dor, de;
    for (int64_t t = 0; t < total; ++t) {
      // The same row-major position on both sides (ir/CopyShape.h, as the CUDA lowering).
      if (!same) de = ir::regroup(e, ext, dext);
      const std::vector<int64_t>& dc = same ? e : de;
      for (size_t k = 0; k < ext.size(); ++k)
        si[sd[k]] = so[sd[k]] + e[k];
      for (size_t k = 0; k < dext.size(); ++k)
        di[dd[k]] = dor[dd[k]] + dc[k];
      bool sok, dok;
      int64_t soff = offset_of(s, si, &sok);
      int64_t doff = offset_of(d, di, &dok);
      if (dok) d.data[doff] = round_to(d.dtype, sok ? s.data[soff] : 0.0);
      for (int k = static_cast<int>(ext.size()) - 1; k >= 0; --k) {
        if (++e[k] < ext[k]) break;
        e[k] = 0;
      }
    }
  }

private:
  CRegion src_, dst_;
  SourceLoc loc_;
};

/// Reads/writes a 2-d view of a region: element (r, c) of the region's two non-unit (or only)
/// dimensions, optionally transposed.
struct View2 {
  const CRegion* reg;
  int d0, d1;
  bool trans;
  int64_t rows, cols;
  View2(const CRegion& r, bool t) : reg(&r), trans(t) {
    if (r.extent.size() == 2) {
      d0 = 0, d1 = 1;
    } else {
      std::vector<int> nu = nonunit(r.extent);
      internal_assert(nu.size() == 2) << "gemm operand is not 2-d";
      d0 = nu[0], d1 = nu[1];
    }
    rows = r.extent[d0], cols = r.extent[d1];
    if (trans) std::swap(rows, cols);
  }
};

class GemmS : public CStmt {
public:
  GemmS(const ir::Gemm* op, CompileEnv& env)
      : a_(op->a, env, op->loc), b_(op->b, env, op->loc), c_(op->c, env, op->loc),
        ta_(op->trans_a), tb_(op->trans_b), clear_(op->clear), loc_(op->loc) {}
  void exec(Ctx& c) override {
    View2 va(a_, ta_), vb(b_, tb_), vc(c_, false);
    int64_t M = va.rows, K = va.cols, N = vb.cols;
    std::vector<double> A = gather(c, va), B = gather(c, vb);
    std::vector<double> acc(M * N, 0.0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        double x = A[m * K + k];
        if (x == 0) continue;
        const double* brow = &B[k * N];
        double* arow = &acc[m * N];
        for (int64_t n = 0; n < N; ++n) arow[n] += x * brow[n];
      }
    Storage& cs = *c.buf[c_.slot];
    std::vector<int64_t> o = c_.origin(c, loc_), idx = o;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        idx[vc.d0] = o[vc.d0] + m;
        idx[vc.d1] = o[vc.d1] + n;
        bool ok;
        int64_t off = offset_of(cs, idx, &ok);
        if (!ok) continue;
        double prev = clear_ ? 0.0 : cs.data[off];
        cs.data[off] = round_to(cs.dtype, prev + acc[m * N + n]);
      }
  }

private:
  std::vector<double> gather(Ctx& c, const View2& v) {
    const Storage& s = *c.buf[v.reg->slot];
    std::vector<int64_t> o = v.reg->origin(c, loc_), idx = o;
    std::vector<double> out(v.rows * v.cols);
    for (int64_t r = 0; r < v.rows; ++r)
      for (int64_t q = 0; q < v.cols; ++q) {
        idx[v.d0] = o[v.d0] + (v.trans ? q : r);
        idx[v.d1] = o[v.d1] + (v.trans ? r : q);
        bool ok;
        int64_t off = offset_of(s, idx, &ok);
        out[r * v.cols + q] = ok ? s.data[off] : 0.0;
      }
    return out;
  }
  CRegion a_, b_, c_;
  bool ta_, tb_, clear_;
  SourceLoc loc_;
};

class FillS : public CStmt {
public:
  FillS(const ir::Fill* op, CompileEnv& env)
      : dst_(op->dst, env, op->loc), value_(compile_expr(op->value, env.lay, op->loc)),
        loc_(op->loc) {}
  void exec(Ctx& c) override {
    Storage& d = *c.buf[dst_.slot];
    double v = round_to(d.dtype, eval_uniform(*value_, c, "a fill value", loc_));
    std::vector<int64_t> o = dst_.origin(c, loc_), e(o.size(), 0), idx = o;
    int64_t total = 1;
    for (int64_t x : dst_.extent) total *= x;
    for (int64_t t = 0; t < total; ++t) {
      for (size_t k = 0; k < o.size(); ++k) idx[k] = o[k] + e[k];
      bool ok;
      int64_t off = offset_of(d, idx, &ok);
      if (ok) d.data[off] = v;
      for (int k = static_cast<int>(o.size()) - 1; k >= 0; --k) {
        if (++e[k] < dst_.extent[k]) break;
        e[k] = 0;
      }
    }
  }

private:
  CRegion dst_;
  std::unique_ptr<CExpr> value_;
  SourceLoc loc_;
};

class ReduceS : public CStmt {
public:
  ReduceS(const ir::Reduce* op, CompileEnv& env)
      : src_(env.lay.buffer(op->src)), dst_(env.lay.buffer(op->dst)), op_(op->op), dim_(op->dim),
        clear_(op->clear) {}
  void exec(Ctx& c) override {
    const Storage& s = *c.buf[src_];
    Storage& d = *c.buf[dst_];
    int64_t outer = 1, inner = 1, n = s.shape[dim_];
    for (int k = 0; k < dim_; ++k) outer *= s.shape[k];
    for (size_t k = dim_ + 1; k < s.shape.size(); ++k) inner *= s.shape[k];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double acc = identity();
        for (int64_t r = 0; r < n; ++r) acc = combine(acc, s.data[(o * n + r) * inner + i]);
        double& out = d.data[o * inner + i];
        out = round_to(d.dtype, clear_ ? acc : combine(out, acc));
      }
  }

private:
  double identity() const {
    switch (op_) {
    case ir::ReduceOp::max: return -INFINITY;
    case ir::ReduceOp::min: return INFINITY;
    case ir::ReduceOp::sum: return 0;
    case ir::ReduceOp::absmax: return 0;
    }
    return 0;
  }
  double combine(double a, double b) const {
    switch (op_) {
    case ir::ReduceOp::max: return std::fmax(a, b);
    case ir::ReduceOp::min: return std::fmin(a, b);
    case ir::ReduceOp::sum: return a + b;
    case ir::ReduceOp::absmax: return std::fmax(std::fabs(a), std::fabs(b));
    }
    return 0;
  }
  int src_, dst_;
  ir::ReduceOp op_;
  int dim_;
  bool clear_;
};

} // namespace

std::unique_ptr<CStmt> compile_copy(const ir::Copy* op, CompileEnv& env) {
  return std::make_unique<CopyS>(op, env);
}
std::unique_ptr<CStmt> compile_gemm(const ir::Gemm* op, CompileEnv& env) {
  return std::make_unique<GemmS>(op, env);
}
std::unique_ptr<CStmt> compile_fill(const ir::Fill* op, CompileEnv& env) {
  return std::make_unique<FillS>(op, env);
}
std::unique_ptr<CStmt> compile_reduce(const ir::Reduce* op, CompileEnv& env) {
  return std::make_unique<ReduceS>(op, env);
}

} // namespace tp::cpu
