// GEMV for one-row decode GEMMs (see GemmGemv.h).
#include "ops/gemm/GemmGemv.h"

#include "tilepilot/tilepilot.h"

namespace tp::ops::gemv {

bool gemv_of(const Config& c) {
  auto it = c.find("gemv");
  return it != c.end() && it->second == 1;
}

Kernel build_gemv(DType dtype, const Config& c) {
  const int64_t bn = c.at("bn"), bk = c.at("bk");
  const int stages = static_cast<int>(c.at("stages"));
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, dtype), B("B", {N, K}, dtype), C("C", {M, N}, dtype);
  auto body = [&](Var bx) {
    Tile b = alloc_fragment({bn, bk}, f32), x = alloc_fragment({bk}, f32);
    Tile part = alloc_fragment({bn, bk}, f32), y = alloc_fragment({bn}, f32);
    clear(part);
    // The tiles are staged through shared memory `stages - 1` steps ahead where B's rows are
    // 16-byte aligned; elsewhere the loop runs serially (docs/schedules.md).
    Schedule schedule{.stages = stages, .copies = Schedule::Copies::cp_async};
    pipelined(ceildiv(K, bk), schedule, [&](Var k) {
      copy(B.tile(bx * bn, k * bk), b);
      copy(A.tile(0, k * bk), x);
      parallel({bn, bk}, [&](Var i, Var j) { part(i, j) = part(i, j) + b(i, j) * x(j); });
    });
    reduce_sum(part, y, 1);
    copy(y, C.tile(0, bx * bn));
  };
  return kernel("gemv_nt", {A, B, C}, grid(ceildiv(N, bn)),
                threads(static_cast<int>(c.at("threads"))), body);
}

Config gemv_config() {
  // 16 rows of 256 columns a step, 256 threads, 4 stages: of six tiles at six M = 1 shapes
  // (device run q3, H100, 2026-12-06), 32 or 64 rows a block and 128-column steps were slower
  // at every shape; 3 stages were 0.4-3.4 % slower at four and within 0.1 % at two. bm is not
  // read; 64 keeps the config a valid wgmma tile when a partial config sets gemv=0 over it.
  return {{"gemv", 1}, {"bm", 64}, {"bn", 16}, {"bk", 256}, {"stages", 4}, {"threads", 256}};
}

} // namespace tp::ops::gemv
