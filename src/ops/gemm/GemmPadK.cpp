// K padding for unaligned GEMM operands (see GemmPadK.h).
#include "ops/gemm/GemmPadK.h"

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
  if (p.at("K") % a == 0) return false;
  return l == "nt" || (l == "nn" && p.at("N") % a == 0);
}

int64_t padded_k(const Problem& p) {
  const int64_t a = align_elems(p.dtype);
  return (p.at("K") + a - 1) / a * a;
}

Kernel build_pad(DType dtype, const std::string& layout) {
  // 32 x 128 elements a block, 256 threads: 16 a thread, in 16-byte runs on the padded side.
  constexpr int64_t rows = 32, cols = 128;
  const bool tb = layout == "nt";
  Dim M("M"), N("N"), K("K"), Kp("Kp");
  Tensor A("A", {M, K}, dtype), Ap("Ap", {M, Kp}, dtype);
  Tensor B("B", tb ? std::vector<Expr>{N, K} : std::vector<Expr>{K, N}, dtype);
  Tensor Bp("Bp", tb ? std::vector<Expr>{N, Kp} : std::vector<Expr>{Kp, N}, dtype);
  // One grid over both: Ap's tiles first, then Bp's, row-major within each.
  Expr a_cols = ceildiv(Kp, cols), a_tiles = ceildiv(M, rows) * a_cols;
  Expr b_cols = tb ? ceildiv(Kp, cols) : ceildiv(N, cols);
  Expr b_tiles = (tb ? ceildiv(N, rows) : ceildiv(Kp, rows)) * b_cols;
  return kernel("gemm_" + layout + "_pad_k", {A, B, Ap, Bp}, grid(a_tiles + b_tiles), threads(256),
                [&](Var bx) {
                  Tile t = alloc_fragment({rows, cols}, dtype);
                  // A copy reads zeros past its tensor's edge and stores only inside its
                  // destination: the padding is the zeros past K.
                  auto pad = [&](const Tensor& from, const Tensor& to, Expr tile, Expr ncols) {
                    Expr r = tile / ncols * rows, c = tile % ncols * cols;
                    copy(from.tile(r, c), t);
                    copy(t, to.tile(r, c));
                  };
                  if_then_else(
                      bx < a_tiles, [&] { pad(A, Ap, bx, a_cols); },
                      [&] { pad(B, Bp, bx - a_tiles, b_cols); });
                });
}

std::vector<ArgSpec> pad_intermediates(const Problem& p) {
  const int64_t M = p.at("M"), N = p.at("N"), Kp = padded_k(p);
  const bool tb = p.options.at("layout") == "nt";
  return {{p.dtype, {M, Kp}},
          {p.dtype, tb ? std::vector<int64_t>{N, Kp} : std::vector<int64_t>{Kp, N}}};
}

} // namespace tp::ops::padk
