// GEMV for one-row decode GEMMs (see GemmGemv.h).
#include "ops/gemm/GemmGemv.h"

#include <vector>

#include "tilepilot/tilepilot.h"

namespace tp::ops::gemv {

bool gemv_of(const Config& c) {
  return rows_of(c) > 0;
}

int64_t rows_of(const Config& c) {
  auto it = c.find("gemv");
  return it == c.end() ? 0 : it->second;
}

Kernel build_gemv(DType dtype, const std::string& layout, const Config& c) {
  const int64_t bn = c.at("bn"), bk = c.at("bk"), rows = rows_of(c);
  const int stages = static_cast<int>(c.at("stages"));
  // nt: B [N, K], a block's tile is bn rows of K (outputs along its rows). nn: B [K, N], the
  // tile is bk rows of bn columns (outputs along its columns). Either way each tile's rows are
  // contiguous in memory, so its loads are 16-byte runs; only the axis that K runs along, and so
  // the axis the partials are summed along, differs.
  const bool bt = layout == "nt";
  const int k_axis = bt ? 1 : 0;
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, dtype), C("C", {M, N}, dtype);
  Tensor B("B", bt ? std::vector<Expr>{N, K} : std::vector<Expr>{K, N}, dtype);
  const std::vector<int64_t> tile =
      bt ? std::vector<int64_t>{bn, bk} : std::vector<int64_t>{bk, bn};
  auto body = [&](Var bx, Var by) {
    // One set of tiles per row of A the block owns: each B element loaded is used `rows` times.
    // Rows past M read zeros (a copy's edge) and are not stored.
    Tile b = alloc_fragment(tile, f32);
    std::vector<Tile> x, part, y;
    for (int64_t r = 0; r < rows; ++r) {
      x.push_back(alloc_fragment({bk}, f32));
      part.push_back(alloc_fragment(tile, f32));
      y.push_back(alloc_fragment({bn}, f32));
      clear(part.back());
    }
    // The tiles are staged through shared memory `stages - 1` steps ahead where B's rows are
    // 16-byte aligned; elsewhere the loop runs serially (docs/schedules.md).
    Schedule schedule{.stages = stages, .copies = Schedule::Copies::cp_async};
    pipelined(ceildiv(K, bk), schedule, [&](Var k) {
      copy(bt ? B.tile(bx * bn, k * bk) : B.tile(k * bk, bx * bn), b);
      for (int64_t r = 0; r < rows; ++r)
        copy(A.tile(by * rows + r, k * bk), x[r]);
      parallel(tile, [&](Var i, Var j) {
        for (int64_t r = 0; r < rows; ++r)
          part[r](i, j) = part[r](i, j) + b(i, j) * x[r](bt ? Expr(j) : Expr(i));
      });
    });
    for (int64_t r = 0; r < rows; ++r) {
      reduce_sum(part[r], y[r], k_axis);
      copy(y[r], C.tile(by * rows + r, bx * bn));
    }
  };
  return kernel("gemv_" + layout + "_r" + std::to_string(rows), {A, B, C},
                grid(ceildiv(N, bn), ceildiv(M, rows)), threads(static_cast<int>(c.at("threads"))),
                body);
}

Config gemv_config() {
  // 16 rows of 256 columns a step, 256 threads, 4 stages: of six tiles at six M = 1 shapes
  // (device run q3, H100, 2026-12-06), 32 or 64 rows a block and 128-column steps were slower
  // at every shape; 3 stages were 0.4-3.4 % slower at four and within 0.1 % at two. bm is not
  // read; 64 keeps the config a valid wgmma tile when a partial config sets gemv=0 over it.
  return {{"gemv", 1}, {"bm", 64}, {"bn", 16}, {"bk", 256}, {"stages", 4}, {"threads", 256}};
}

Config gemv_config_nn() {
  // 32 columns of C a block (64-byte rows of B), 256 rows of K a step, 256 threads, 4 stages:
  // of five configs at M = 1, N = K = 4096 (H100, 2026-12-07, call a1) the fastest, 0.0215 ms
  // against cuBLASLt's 0.0202; 64 x 128 0.0265, 32 x 128 0.0269, 16 x 256 0.0260, 64 x 64
  // with 6 stages 0.0304. Call a3: 512-row steps are refused (bk), 6 stages and 128 threads
  // slower at all six shapes timed. The nn default where its grid is one block a SM or less
  // (gemv_default, GemmOp.cpp).
  return {{"gemv", 1}, {"bm", 64}, {"bn", 32}, {"bk", 256}, {"stages", 4}, {"threads", 256}};
}

} // namespace tp::ops::gemv
