// Differential cases of gemms and their loops: accumulators stored, added and TMA-stored, mma
// and wgmma at odd extents, blocks per SM, staged tiles and TMA boxes (DifferentialCases.h lists
// them).
#pragma once
#include "DiffCase.h"
#include "ShiftedGemm.h"
#include "StagedTileAfterLoop.h"

namespace tp::difftest {

/// acc = A[row0 : row0 + 64, k0 : k0 + bk] B[k0 : k0 + bk, col0 : col0 + 64], a 64 x 64 f32
/// accumulator (one warpgroup's wgmma on sm_90a), for the cases that write one out.
inline Tile accumulator_block(const Tensor& A, const Tensor& B, Expr row0, Expr k0, Expr col0,
                              int64_t bk) {
  Tile As = alloc_shared({64, bk}, bf16);
  Tile Bs = alloc_shared({bk, 64}, bf16);
  Tile acc = alloc_fragment({64, 64}, f32);
  clear(acc);
  copy(A.tile(row0, k0), As);
  copy(B.tile(k0, col0), Bs);
  gemm(As, Bs, acc);
  return acc;
}

/// a[2] = a[0] a[1], or a[2] += a[0] a[1] when `accumulate`.
inline void expect_product(std::vector<HostTensor>& a, bool accumulate) {
  int64_t M = a[2].shape()[0], N = a[2].shape()[1];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      a[2].set(i * N + j, (accumulate ? a[2].get(i * N + j) : 0.0) + dot(a[0], a[1], i, j));
}

/// (b') Tile atomic_add of a gemm accumulator, two K splits adding into C: on sm_90a adjacent
/// columns go out as one paired reduction where both are in bounds and the pair's address is
/// 8-byte aligned, element by element elsewhere. N = 45 (odd) makes every other row's pairs
/// misaligned and puts the last pair across the edge, so every path runs in one launch; the
/// inputs are small integers, so every order of the adds gives the same f32 sums.
inline DiffCase atomic_add_accumulator_pairs() {
  DiffCase c;
  c.name = "AccumulatorAtomicAddPairsAdjacentColumns";
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  c.kernel = kernel("atomic_pairs", {A, B, C}, grid(ceildiv(N, 64), ceildiv(M, 64), 2),
                    threads(128), [&](Var bx, Var by, Var z) {
                      Tile acc = accumulator_block(A, B, by * 64, z * 32, bx * 64, 32);
                      atomic_add(C.tile(by * 64, bx * 64), acc);
                    });
  c.args = {ints(bf16, {75, 64}, 16), ints(bf16, {64, 45}, 17), ints(f32, {75, 45}, 18)};
  c.outputs = {2};
  c.expect = [](std::vector<HostTensor>& a) { expect_product(a, true); };
  return c;
}

/// (b'') A gemm accumulator stored element by element under a guard (a grouped GEMM's
/// epilogue), in a kernel that asks for paired stores: adjacent columns go out as one 2-element
/// store where both are in bounds and the pair is aligned, element by element elsewhere. N = 45
/// as in (b'), into bf16 (small integer sums, exact).
inline DiffCase store_accumulator_pairs() {
  DiffCase c;
  c.name = "AccumulatorStoresPairAdjacentColumns";
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, bf16);
  c.kernel = kernel("store_pairs", {A, B, C}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                    [&](Var bx, Var by) {
                      Tile acc = accumulator_block(A, B, by * 64, 0, bx * 64, 64);
                      annotate("paired_stores", "1");
                      parallel({64, 64}, [&](Var i, Var j) {
                        Expr row = by * 64 + i, col = bx * 64 + j;
                        if_then(row < M && col < N, [&] { C(row, col) = acc(i, j); });
                      });
                    });
  c.args = {ints(bf16, {75, 64}, 19), ints(bf16, {64, 45}, 20), sentinel(bf16, {75, 45})};
  c.outputs = {2};
  c.expect = [](std::vector<HostTensor>& a) { expect_product(a, false); };
  return c;
}

/// (e) A grouped GEMM whose loop reads its row block from a shared tile the kernel's threads
/// write (the warp-specialized producer must not read it unordered).
inline Kernel grouped_gemm_kernel(bool index_in_shared) {
  Dim M("M"), N("N"), K("K"), G("G");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32), Off("Off", {G}, i32);
  return kernel("grouped", {A, B, C, Off}, grid(ceildiv(N, 64), G), threads(128),
                [&](Var bx, Var by) {
                  Expr row;
                  if (index_in_shared) {
                    Tile idx = alloc_shared({1}, i32);
                    idx(0) = Off(by);
                    row = Expr(idx(0)) * 64;
                  } else {
                    row = Expr(Off(by)) * 64;
                  }
                  Tile As = alloc_shared({64, 64}, bf16);
                  Tile Bs = alloc_shared({64, 64}, bf16);
                  Tile acc = alloc_fragment({64, 64}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, 64), 2, [&](Var k) {
                    copy(A.tile(row, k * 64), As);
                    copy(B.tile(k * 64, bx * 64), Bs);
                    gemm(As, Bs, acc);
                  });
                  copy(acc, C.tile(row, bx * 64));
                });
}

inline DiffCase shared_index_between_warp_roles() {
  DiffCase c;
  c.name = "SharedTileReadAcrossWarpRolesIsOrdered";
  c.kernel = grouped_gemm_kernel(true);
  HostTensor off(i32, {3});
  off.set(0, 2), off.set(1, 0), off.set(2, 1);
  c.args = {ints(bf16, {192, 128}, 7), ints(bf16, {128, 128}, 8), sentinel(f32, {192, 128}), off};
  c.outputs = {2};
  c.expect = [](std::vector<HostTensor>& a) {
    int64_t M = a[2].shape()[0], N = a[2].shape()[1];
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        a[2].set(i * N + j, dot(a[0], a[1], i, j));
  };
  return c;
}

/// gemm at odd extents (77 x 45 x 133): partial tiles in every dimension.
inline DiffCase gemm_odd_extents() {
  return gemm_case(
      "GemmAtOddExtents", 77, 45, 133,
      [](Tile& acc, Tensor& C, Var bx, Var by) { copy(acc, C.tile(by * 64, bx * 64)); },
      [](std::vector<HostTensor>& a) {
        int64_t M = a[2].shape()[0], N = a[2].shape()[1];
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j)
            a[2].set(i * N + j, dot(a[0], a[1], i, j));
      });
}

/// The gemm at odd extents again, asking for two blocks per SM: a performance option (half the
/// register file and shared memory per block, warp-specialized on sm_90a), never a result.
inline DiffCase two_blocks_per_sm() {
  DiffCase c = gemm_odd_extents();
  c.name = "TwoBlocksPerSmChangeNoResult";
  c.kernel = gemm_kernel(
      c.name, [](Tile& acc, Tensor& C, Var bx, Var by) { copy(acc, C.tile(by * 64, bx * 64)); },
      KernelOptions{.blocks_per_sm = 2});
  return c;
}

/// Three blocks per SM at 16-byte-aligned rows, so that sm_90a launches the warp-specialized
/// variant (the odd extents above run the cp.async one): its consumers raise their registers
/// with setmaxnreg from the block's launch pool, which must hold what they ask for. The rule
/// once asked for 8 more a thread than three blocks are launched with, and the kernel hung.
inline DiffCase three_blocks_per_sm_aligned() {
  DiffCase c = gemm_odd_extents(); // its expectation reads the extents from the tensors
  c.name = "ThreeBlocksPerSmAtAlignedRows";
  c.kernel = gemm_kernel(
      c.name, [](Tile& acc, Tensor& C, Var bx, Var by) { copy(acc, C.tile(by * 64, bx * 64)); },
      KernelOptions{.blocks_per_sm = 3});
  c.args = {ints(bf16, {100, 192}, 1), ints(bf16, {192, 128}, 2), sentinel(f32, {100, 128})};
  return c;
}

/// The accumulator into a bf16 tensor whose rows are 16-byte multiples (100 x 136, K = 96):
/// sm_90a stores it through shared memory by TMA (passes/PlanTmaStores.h), which must drop the
/// edge tiles' elements outside the tensor as the copy rule does, in M and in N. Sums of small
/// integers are exact in bf16 up to 256 and rounded the same way beyond it on both sides.
inline DiffCase accumulator_tma_stored_at_edges() {
  DiffCase c = gemm_odd_extents(); // its expectation reads the extents from the tensors
  c.name = "AccumulatorTmaStoredAtEdgeTiles";
  c.kernel = gemm_kernel(
      c.name, [](Tile& acc, Tensor& C, Var bx, Var by) { copy(acc, C.tile(by * 64, bx * 64)); }, {},
      bf16);
  c.args = {ints(bf16, {100, 96}, 1), ints(bf16, {96, 136}, 2), sentinel(bf16, {100, 136})};
  return c;
}

/// A 64-row gemm over 8 warps (lesson 14's shape): on sm_90a wgmma cannot split 64 rows over
/// two warpgroups, so it runs as mma with warps side by side along N. Their rows' max and sum
/// combine across warps, the row vector is stored once, and the bf16 P = s - max goes through
/// shared memory to the second gemm. Keys in two blocks; 100 query rows (a ragged last block).
inline DiffCase gemm_rows_across_warps() {
  DiffCase c;
  c.name = "GemmWithRowsAcrossWarps";
  Dim M("M"), Nk("Nk");
  Tensor A("A", {M, 32}, bf16), B("B", {Nk, 32}, bf16), V("V", {Nk, 64}, bf16);
  Tensor O("O", {M, 64}, f32), Mx("Mx", {M}, f32), S("S", {M}, f32);
  c.kernel = kernel("rows_across_warps", {A, B, V, O, Mx, S}, grid(ceildiv(M, 64)), threads(256),
                    [&](Var by) {
                      Tile As = alloc_shared({64, 32}, bf16), Bs = alloc_shared({64, 32}, bf16);
                      Tile Vs = alloc_shared({64, 64}, bf16);
                      Tile s = alloc_fragment({64, 64}, f32), p = alloc_fragment({64, 64}, bf16);
                      Tile o = alloc_fragment({64, 64}, f32);
                      Tile m = alloc_fragment({64}, f32), t = alloc_fragment({64}, f32);
                      copy(A.tile(by * 64, 0), As);
                      clear(o);
                      clear(t);
                      fill(m, -infinity());
                      pipelined(ceildiv(Nk, 64), 2, [&](Var kb) {
                        copy(B.tile(kb * 64, 0), Bs);
                        copy(V.tile(kb * 64, 0), Vs);
                        gemm(As, Bs, s, {.trans_b = true, .clear = true});
                        reduce_max(s, m, 1, /*clear=*/false);
                        reduce_sum(s, t, 1, /*clear=*/false);
                        parallel({64, 64}, [&](Var i, Var j) { p(i, j) = s(i, j) - m(i); });
                        gemm(p, Vs, o);
                      });
                      copy(o, O.tile(by * 64, 0));
                      copy(m, Mx.tile(by * 64));
                      copy(t, S.tile(by * 64));
                    });
  const int64_t rows = 100, keys = 128;
  c.args = {ints(bf16, {rows, 32}, 31), ints(bf16, {keys, 32}, 32), ints(bf16, {keys, 64}, 33),
            sentinel(f32, {rows, 64}),  sentinel(f32, {rows}),      sentinel(f32, {rows})};
  c.outputs = {3, 4, 5};
  c.expect = [](std::vector<HostTensor>& a) {
    const int64_t R = a[3].shape()[0], Nk = a[1].shape()[0];
    for (int64_t i = 0; i < R; ++i) {
      double mx = -INFINITY, sum = 0;
      std::vector<double> o(64, 0.0);
      for (int64_t k0 = 0; k0 < Nk; k0 += 64) {
        std::vector<double> s(64);
        for (int64_t j = 0; j < 64; ++j) {
          double d = 0;
          for (int64_t e = 0; e < 32; ++e)
            d += a[0].get(i * 32 + e) * a[1].get((k0 + j) * 32 + e);
          s[j] = d;
          mx = std::fmax(mx, d);
          sum += d;
        }
        for (int64_t j = 0; j < 64; ++j) // s - max: an integer in [-256, 0], exact in bf16
          for (int64_t d = 0; d < 64; ++d)
            o[d] += (s[j] - mx) * a[2].get((k0 + j) * 64 + d);
      }
      for (int64_t d = 0; d < 64; ++d)
        a[3].set(i * 64 + d, o[d]);
      a[4].set(i, mx);
      a[5].set(i, sum);
    }
  };
  return c;
}

/// One warp's mma gemm (wgmma needs whole warpgroups, so sm_90a takes mma too): C = A B over
/// a 128 x 8 tile, K in steps of 32 through `stages` (1: a serial loop), B [K, N] or, with
/// trans_b, [N, K]. K = 48 leaves half of the last step past A's and B's end (zeros).
inline DiffCase one_warp_mma(const std::string& name, int64_t K, int stages, bool trans_b) {
  DiffCase c;
  c.name = name;
  Dim M("M"), Kd("K"), N("N");
  Tensor A("A", {M, Kd}, bf16), C("C", {M, N}, f32);
  Tensor B = trans_b ? Tensor("B", {N, Kd}, bf16) : Tensor("B", {Kd, N}, bf16);
  c.kernel =
      kernel("one_warp_" + name, {A, B, C}, grid(ceildiv(N, 8), ceildiv(M, 128)), threads(32),
             [&](Var bx, Var by) {
               Tile acc = alloc_fragment({128, 8}, f32);
               fill(acc, 0.0);
               auto step = [&](Var ko) {
                 Tile As = alloc_shared({128, 32}, bf16);
                 Tile Bs = trans_b ? alloc_shared({8, 32}, bf16) : alloc_shared({32, 8}, bf16);
                 copy(A.tile(by * 128, ko * 32), As);
                 if (trans_b)
                   copy(B.tile(bx * 8, ko * 32), Bs);
                 else
                   copy(B.tile(ko * 32, bx * 8), Bs);
                 gemm(As, Bs, acc, {.trans_b = trans_b});
               };
               if (stages > 1)
                 pipelined(ceildiv(Kd, 32), stages, step);
               else
                 serial(ceildiv(Kd, 32), step);
               copy(acc, C.tile(by * 128, bx * 8));
             });
  const int64_t Mv = 100, Nv = 16;
  c.args = {ints(bf16, {Mv, K}, 41), trans_b ? ints(bf16, {Nv, K}, 42) : ints(bf16, {K, Nv}, 42),
            sentinel(f32, {Mv, Nv})};
  c.outputs = {2};
  c.expect = [trans_b](std::vector<HostTensor>& a) {
    const int64_t M = a[0].shape()[0], K = a[0].shape()[1], N = a[2].shape()[1];
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double d = 0;
        for (int64_t k = 0; k < K; ++k)
          d += a[0].get(i * K + k) * a[1].get(trans_b ? j * K + k : k * N + j);
        a[2].set(i * N + j, d);
      }
  };
  return c;
}

inline DiffCase one_warp_mma_pipelined_tail() {
  return one_warp_mma("OneWarpMmaPipelinedKTail", 48, 3, false);
}

inline DiffCase one_warp_mma_serial_tail() {
  return one_warp_mma("OneWarpMmaSerialKTail", 48, 1, false);
}

inline DiffCase one_warp_mma_pipelined() {
  return one_warp_mma("OneWarpMmaPipelined", 64, 3, false);
}

inline DiffCase one_warp_mma_trans_b() {
  return one_warp_mma("OneWarpMmaTransB", 48, 3, true);
}

/// One warp's mma with A from registers (mma_rs): A [32, 16] f16 written element-wise, B from
/// shared, into a 32 x 64 accumulator started at -3.
inline DiffCase one_warp_mma_register_a() {
  DiffCase c;
  c.name = "OneWarpMmaRegisterA";
  Dim M("M");
  Tensor B("B", {16, 64}, f16), C("C", {M, 64}, f32);
  c.kernel = kernel("one_warp_rs", {B, C}, grid(ceildiv(M, 32)), threads(32), [&](Var by) {
    Tile a = alloc_fragment({32, 16}, f16), acc = alloc_fragment({32, 64}, f32);
    Tile Bs = alloc_shared({16, 64}, f16);
    parallel({32, 16}, [&](Var i, Var j) { a(i, j) = (j / 3) - by + i % 3; });
    copy(B.tile(0, 0), Bs);
    parallel({32, 64}, [&](Var i, Var j) { acc(i, j) = -3.0; });
    gemm(a, Bs, acc);
    copy(acc, C.tile(by * 32, 0));
  });
  c.args = {ints(f16, {16, 64}, 43), sentinel(f32, {40, 64})};
  c.outputs = {1};
  c.expect = [](std::vector<HostTensor>& x) {
    for (int64_t i = 0; i < 40; ++i) {
      int64_t by = i / 32, r = i % 32;
      for (int64_t j = 0; j < 64; ++j) {
        double d = -3;
        for (int64_t k = 0; k < 16; ++k)
          d += double(k / 3 - by + r % 3) * x[0].get(k * 64 + j);
        x[1].set(i * 64 + j, d);
      }
    }
  };
  return c;
}

/// A pipelined gemm whose A tile is a box of an NHWC tensor X [Nb, 8, 8, 128]: step k is a
/// window offset (kh, kw) = (k / 6, k / 2 % 3) and a chunk of 64 channels, and its A tile is the
/// box X[n, kh - 1 : +8, kw - 1 : +8, c0 : +64] flattened to [64 pixels, 64], the taps of a
/// 3 x 3 stencil with a zero border of 1 (boxes starting at -1 or running past the edge). On
/// sm_90a the box is one 4-d TMA load of the warp-specialized loop.
inline DiffCase box_copy_into_pipelined_gemm() {
  DiffCase c;
  c.name = "BoxCopyIntoPipelinedGemm";
  Dim Nb("Nb"), P("P");
  Tensor X("X", {Nb, 8, 8, 128}, bf16), W("W", {1152, 64}, bf16), Y("Y", {P, 64}, f32);
  c.kernel =
      kernel("box_gemm", {X, W, Y}, grid(1, ceildiv(P, 64)), threads(128), [&](Var bx, Var by) {
        Tile As = alloc_shared({64, 64}, bf16), Bs = alloc_shared({64, 64}, bf16);
        Tile acc = alloc_fragment({64, 64}, f32);
        clear(acc);
        pipelined(18, 2, [&](Var k) {
          Expr kh = k / 6, kw = k / 2 % 3, c0 = k % 2 * 64;
          copy(X.tile({by, kh - 1, kw - 1, c0}, {1, 8, 8, 64}), As);
          copy(W.tile(k * 64, bx * 64), Bs);
          gemm(As, Bs, acc);
        });
        copy(acc, Y.tile(by * 64, bx * 64));
      });
  c.args = {ints(bf16, {2, 8, 8, 128}, 53), ints(bf16, {1152, 64}, 59), sentinel(f32, {128, 64})};
  c.outputs = {2};
  c.expect = [](std::vector<HostTensor>& a) {
    for (int64_t p = 0; p < 128; ++p)
      for (int64_t f = 0; f < 64; ++f) {
        int64_t n = p / 64, oh = p / 8 % 8, ow = p % 8;
        double s = 0;
        for (int64_t kh = 0; kh < 3; ++kh)
          for (int64_t kw = 0; kw < 3; ++kw) {
            int64_t h = oh + kh - 1, w = ow + kw - 1;
            if (h < 0 || h >= 8 || w < 0 || w >= 8) continue;
            for (int64_t ch = 0; ch < 128; ++ch)
              s += a[0].get(((n * 8 + h) * 8 + w) * 128 + ch) *
                   a[1].get(((kh * 3 + kw) * 128 + ch) * 64 + f);
          }
        a[2].set(p * 64 + f, s);
      }
  };
  return c;
}

/// A staged tile of a pipelined gemm loop, copied out after the loop: it holds the last
/// iteration's tile (a copy in a loop leaves its last value). Five iterations over three stages
/// end in stage 1; the lowering read stage 0 (random programs 3054 and 3367, H100, 2026-12-07).
inline DiffCase staged_tile_read_after_its_loop() {
  DiffCase c;
  c.name = "StagedTileReadAfterItsLoop";
  c.kernel = tp::difftest::staged_tile_used_after_loop(64, 64, 32, 128, 3, false);
  const int64_t m = 64, n = 64, k = 160;
  c.args = {ints(bf16, {m, k}, 61), ints(bf16, {k, n}, 67), sentinel(f32, {m, n}),
            sentinel(bf16, {m, 32})};
  c.outputs = {2, 3};
  c.expect = [=](std::vector<HostTensor>& a) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q)
          s += a[0].get(i * k + q) * a[1].get(q * n + j);
        a[2].set(i * n + j, s);
      }
      for (int64_t j = 0; j < 32; ++j)
        a[3].set(i * 32 + j, a[0].get(i * k + (k - 32) + j));
    }
  };
  return c;
}

/// tp::difftest::shifted_gemm: a pipelined gemm whose A tile starts `shift` columns off the K
/// step and 3 rows above the block, over 4 K steps (the last one ragged) and two block rows.
/// A shift of -8 (16 bytes back) takes TMA on sm_90a; 3 takes the cp.async plan (a TMA box off
/// the 16-byte grid stopped an H100: random program 4828). One stage keeps no gemm in flight
/// (random program 4418 hung an H100 when it did).
inline DiffCase shifted_gemm_case(const char* name, int64_t shift, int stages) {
  DiffCase c;
  c.name = name;
  c.kernel = tp::difftest::shifted_gemm(shift, stages);
  const int64_t m = 200, n = 128, k = 232;
  c.args = {ints(bf16, {m, k}, 71), ints(bf16, {k, n}, 73), sentinel(f32, {m, n})};
  c.outputs = {2};
  c.expect = [=](std::vector<HostTensor>& a) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t step = 0; step < (k + 63) / 64; ++step)
          for (int64_t q = 0; q < 64; ++q) {
            const int64_t r = i - 3, col = step * 64 + shift + q, krow = step * 64 + q;
            if (r >= 0 && col >= 0 && col < k && krow < k)
              s += a[0].get(r * k + col) * a[1].get(krow * n + j);
          }
        a[2].set(i * n + j, s);
      }
  };
  return c;
}

inline DiffCase gemm_tile_sixteen_bytes_back() {
  return shifted_gemm_case("GemmTileStartingSixteenBytesBack", -8, 3);
}

inline DiffCase gemm_tile_off_the_sixteen_byte_grid() {
  return shifted_gemm_case("GemmTileOffTheSixteenByteGrid", 3, 3);
}

inline DiffCase gemm_loop_of_one_stage() {
  return shifted_gemm_case("GemmLoopOfOneStage", 0, 1);
}

} // namespace tp::difftest
