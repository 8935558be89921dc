// The swapped decode GEMM (see GemmSwapAB.h).
#include "ops/gemm/GemmSwapAB.h"

#include "tilepilot/error.h"
#include "tilepilot/tilepilot.h"

namespace tp::ops::swapab {

bool swapped(const Config& c) {
  auto it = c.find("swap_ab");
  return it != c.end() && it->second == 1;
}

void validate(const Config& c) {
  if (!swapped(c)) return;
  // Each knob the swapped kernel does not take, with its neutral value (what absent means).
  for (const auto& [k, neutral] : {std::pair<const char*, int64_t>{"splits", 1},
                                   {"gemv", 0},
                                   {"cluster", 1},
                                   {"persistent", 0}})
    if (c.count(k) && c.at(k) != neutral)
      user_error() << "gemm: swap_ab=1 is one kernel over all of K and takes no " << k << "="
                   << c.at(k) << "; leave " << k << " out (or set it to its neutral value)";
  const int64_t bm = c.at("bm"), bn = c.at("bn"), threads = c.at("threads");
  if (bm > 256)
    user_error() << "gemm: swap_ab=1 runs bm along the tensor cores' columns, at most 256 (got bm="
                 << bm << "); use bm <= 256";
  if (threads % 128 != 0 || bn != 64 * (threads / 128))
    user_error() << "gemm: swap_ab=1 gives each warpgroup of 128 threads 64 of the bn columns, so "
                 << "bn must be 64 * threads / 128 (got bn=" << bn << ", threads=" << threads
                 << "); e.g. bn=64 with threads=128 or bn=128 with threads=256";
}

Kernel build_swapped(DType dtype, const std::string& layout, const Config& c) {
  const int64_t bm = c.at("bm"), bn = c.at("bn"), bk = c.at("bk");
  const int stages = static_cast<int>(c.at("stages"));
  const bool ta = layout == "tn", tb = layout == "nt";
  Dim M("M"), N("N"), K("K");
  Tensor A("A", ta ? std::vector<Expr>{K, M} : std::vector<Expr>{M, K}, dtype);
  Tensor B("B", tb ? std::vector<Expr>{N, K} : std::vector<Expr>{K, N}, dtype);
  Tensor C("C", {M, N}, dtype);
  return kernel("gemm_" + layout + "_swapped", {A, B, C}, grid(ceildiv(N, bn), ceildiv(M, bm)),
                threads(static_cast<int>(c.at("threads"))), [&](Var bx, Var by) {
                  // The tiles as the layout stores them; the gemm's transposes make B's tile the
                  // [bn, bk] first operand and A's the [bk, bm] second.
                  Tile Bs = tb ? alloc_shared({bn, bk}, dtype) : alloc_shared({bk, bn}, dtype);
                  Tile As = ta ? alloc_shared({bk, bm}, dtype) : alloc_shared({bm, bk}, dtype);
                  Tile acc = alloc_fragment({bn, bm}, f32); // C^T's tile
                  clear(acc);
                  Schedule schedule{.stages = stages, .copies = Schedule::Copies::automatic};
                  pipelined(ceildiv(K, bk), schedule, [&](Var k) {
                    copy(tb ? B.tile(bx * bn, k * bk) : B.tile(k * bk, bx * bn), Bs);
                    copy(ta ? A.tile(k * bk, by * bm) : A.tile(by * bm, k * bk), As);
                    gemm(Bs, As, acc, {.trans_a = !tb, .trans_b = !ta});
                  });
                  // C^T's tile goes out transposed, element by element: M is a few rows, so C is
                  // small against B (M N against N K elements).
                  parallel({bn, bm}, [&](Var j, Var m) {
                    if_then(by * bm + m < Expr(M) && bx * bn + j < Expr(N),
                            [&] { C(by * bm + m, bx * bn + j) = acc(j, m); });
                  });
                });
}

} // namespace tp::ops::swapab
