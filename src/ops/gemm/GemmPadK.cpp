// K padding for unaligned GEMM operands (see GemmPadK.h).
#include "ops/gemm/GemmPadK.h"

#include <optional>

#include "tilepilot/tilepilot.h"

namespace tp::ops::padk {

namespace {

int64_t align_elems(DType t) {
  return 16 / dtype_bytes(t);
}

} // namespace

bool pad_k_of(const Config& c) {
  auto it = c.find("pad_k");
  return it != c.end() && it->second == 1;
}

bool pads(const Problem& p) {
  const int64_t a = align_elems(p.dtype);
  const std::string& l = p.options.at("layout");
  if (l == "tn") return p.at("M") % a != 0 && p.at("N") % a == 0;
  if (p.at("K") % a == 0) return false;
  return l == "nt" || (l == "nn" && p.at("N") % a == 0);
}

bool aligns(const Problem& p, const Config& c) {
  return pad_k_of(c) && pads(p);
}

std::string steps_layout(const Problem& p) {
  const std::string& l = p.options.at("layout");
  return l == "tn" && pads(p) ? "nn" : l;
}

bool pads_b(const Problem& p) {
  return p.options.at("layout") != "tn" || padded_k(p) != p.at("K");
}

int64_t padded_k(const Problem& p) {
  const int64_t a = align_elems(p.dtype);
  return (p.at("K") + a - 1) / a * a;
}

Kernel build_pad(DType dtype, const std::string& layout, bool pad_b) {
  // 32 x 128 elements a block, 256 threads: 16 a thread, in 16-byte runs on the padded side.
  // tn's A is transposed through 32 x 32 tiles of shared memory instead (lesson 3's way), so
  // neither side's access is strided.
  constexpr int64_t rows = 32, cols = 128, square = 32;
  const bool tb = layout == "nt", ta = layout == "tn";
  Dim M("M"), N("N"), K("K"), Kp("Kp");
  Tensor A("A", ta ? std::vector<Expr>{K, M} : std::vector<Expr>{M, K}, dtype),
      Ap("Ap", {M, Kp}, dtype);
  Tensor B("B", tb ? std::vector<Expr>{N, K} : std::vector<Expr>{K, N}, dtype);
  Tensor Bp("Bp", tb ? std::vector<Expr>{N, Kp} : std::vector<Expr>{Kp, N}, dtype);
  // One grid over both: Ap's tiles first, then Bp's, row-major within each.
  const int64_t a_rows = ta ? square : rows, a_width = ta ? square : cols;
  Expr a_cols = ceildiv(Kp, a_width), a_tiles = ceildiv(M, a_rows) * a_cols;
  Expr b_cols = tb ? ceildiv(Kp, cols) : ceildiv(N, cols);
  Expr b_tiles = (tb ? ceildiv(N, rows) : ceildiv(Kp, rows)) * b_cols;
  std::vector<Tensor> params = {A, Ap};
  if (pad_b) params = {A, B, Ap, Bp};
  return kernel(
      "gemm_" + layout + "_pad_k", params, grid(pad_b ? a_tiles + b_tiles : a_tiles), threads(256),
      [&](Var bx) {
        // Only the tiles this kernel's copies use (tn's A needs the square pair; the rest the
        // rectangle).
        std::optional<Tile> t, s, ts;
        if (!ta || pad_b) t = alloc_fragment({rows, cols}, dtype);
        if (ta)
          s = alloc_shared({square, square}, dtype), ts = alloc_fragment({square, square}, dtype);
        // A copy reads zeros past its tensor's edge and stores only inside its destination:
        // the padding is the zeros past K.
        auto pad = [&](const Tensor& from, const Tensor& to, Expr tile, Expr ncols) {
          Expr r = tile / ncols * rows, c = tile % ncols * cols;
          copy(from.tile(r, c), *t);
          copy(*t, to.tile(r, c));
        };
        auto pad_a = [&] {
          if (!ta) return pad(A, Ap, bx, a_cols);
          Expr m = bx / a_cols * square, k = bx % a_cols * square;
          copy(A.tile(k, m), *s);
          parallel({square, square}, [&](Var i, Var j) { (*ts)(i, j) = (*s)(j, i); });
          copy(*ts, Ap.tile(m, k));
        };
        if (!pad_b) return pad_a();
        if_then_else(bx < a_tiles, pad_a, [&] { pad(B, Bp, bx - a_tiles, b_cols); });
      });
}

std::vector<ArgSpec> pad_intermediates(const Problem& p) {
  const int64_t M = p.at("M"), N = p.at("N"), Kp = padded_k(p);
  const bool tb = p.options.at("layout") == "nt";
  std::vector<ArgSpec> out = {{p.dtype, {M, Kp}}};
  if (pads_b(p))
    out.push_back({p.dtype, tb ? std::vector<int64_t>{N, Kp} : std::vector<int64_t>{Kp, N}});
  return out;
}

} // namespace tp::ops::padk
