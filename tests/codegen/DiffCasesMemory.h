// Differential cases of copies, fills, atomics, element access and shared-tile writes: what each
// statement reads and writes, at edge tiles and odd sizes (DifferentialCases.h lists them).
#pragma once
#include "DiffCase.h"

namespace tp::difftest {

/// (a) A region of a register fragment (the gemm accumulator) copied to global memory: exactly
/// acc[16:32, 8:40] lands in C's 16 x 32 box, nothing else of C is written.
inline DiffCase region_copy_from_fragment() {
  return gemm_case(
      "RegionOfFragmentCopiesOnlyTheRegion", 100, 120, 80,
      [](Tile& acc, Tensor& C, Var bx, Var by) {
        copy(acc.region({16, 8}, {16, 32}), C.tile({by * 64, bx * 64}, {16, 32}));
      },
      [](std::vector<HostTensor>& a) {
        const HostTensor &A = a[0], &B = a[1];
        HostTensor& C = a[2];
        int64_t M = C.shape()[0], N = C.shape()[1];
        for (int64_t by = 0; by * 64 < M; ++by)
          for (int64_t bx = 0; bx * 64 < N; ++bx)
            for (int64_t r = 0; r < 16; ++r)
              for (int64_t q = 0; q < 32; ++q) {
                int64_t i = by * 64 + r, j = bx * 64 + q;
                if (i < M && j < N) C.set(i * N + j, dot(A, B, by * 64 + 16 + r, bx * 64 + 8 + q));
              }
      });
}

/// (a') fill of a region of a register fragment: only the region changes.
inline DiffCase region_fill_of_fragment() {
  return gemm_case(
      "FillOfFragmentRegionKeepsTheRest", 70, 64, 64,
      [](Tile& acc, Tensor& C, Var bx, Var by) {
        fill(acc.region({0, 8}, {8, 16}), Expr(-1.0));
        copy(acc, C.tile(by * 64, bx * 64));
      },
      [](std::vector<HostTensor>& a) {
        const HostTensor &A = a[0], &B = a[1];
        HostTensor& C = a[2];
        int64_t M = C.shape()[0], N = C.shape()[1];
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            int64_t r = i % 64, q = j % 64;
            bool in = r < 8 && q >= 8 && q < 24;
            C.set(i * N + j, in ? -1.0 : dot(A, B, i, j));
          }
      });
}

/// (a'') A copy into a region of a register fragment: exactly acc[8:16, 0:64] is loaded (from
/// D, out-of-bounds rows read 0), the rest of the accumulator keeps the gemm's values.
inline DiffCase region_copy_into_fragment() {
  DiffCase c;
  c.name = "CopyIntoFragmentRegionKeepsTheRest";
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32), D("D", {M, N}, f32);
  c.kernel = kernel("region_copy_in", {A, B, C, D}, grid(ceildiv(N, 64), ceildiv(M, 64)),
                    threads(128), [&](Var bx, Var by) {
                      Tile As = alloc_shared({64, 32}, bf16);
                      Tile Bs = alloc_shared({32, 64}, bf16);
                      Tile acc = alloc_fragment({64, 64}, f32);
                      clear(acc);
                      pipelined(ceildiv(K, 32), 2, [&](Var k) {
                        copy(A.tile(by * 64, k * 32), As);
                        copy(B.tile(k * 32, bx * 64), Bs);
                        gemm(As, Bs, acc);
                      });
                      copy(D.tile({by * 64 + 8, bx * 64}, {8, 64}), acc.region({8, 0}, {8, 64}));
                      copy(acc, C.tile(by * 64, bx * 64));
                    });
  c.args = {ints(bf16, {75, 64}, 13), ints(bf16, {64, 64}, 14), sentinel(f32, {75, 64}),
            ints(f32, {75, 64}, 15)};
  c.outputs = {2};
  c.expect = [](std::vector<HostTensor>& a) {
    int64_t M = a[2].shape()[0], N = a[2].shape()[1];
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t r = i % 64;
        a[2].set(i * N + j, r >= 8 && r < 16 ? a[3].get(i * N + j) : dot(a[0], a[1], i, j));
      }
  };
  return c;
}

/// (b) Tile atomic_add at an edge tile: out-of-bounds elements of the global side are dropped.
inline DiffCase atomic_add_edge_tile() {
  DiffCase c;
  c.name = "TileAtomicAddDropsOutOfBounds";
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, f32), C("C", {M, N}, f32);
  c.kernel = kernel("atomic_edge", {A, C}, grid(ceildiv(N, 32), ceildiv(M, 32)), threads(128),
                    [&](Var bx, Var by) {
                      Tile S = alloc_shared({32, 32}, f32);
                      copy(A.tile(by * 32, bx * 32), S);
                      atomic_add(C.tile(by * 32, bx * 32), S);
                      atomic_add(C.tile(by * 32, bx * 32), S);
                    });
  c.args = {ints(f32, {50, 45}, 3), ints(f32, {50, 45}, 4)};
  c.outputs = {1};
  c.expect = [](std::vector<HostTensor>& a) {
    for (int64_t i = 0; i < a[1].numel(); ++i)
      a[1].set(i, a[1].get(i) + 2 * a[0].get(i));
  };
  return c;
}

/// (c) select is lazy: select(g + 1 < N, A(g + 1), 0) never reads A(N); a uniform select
/// outside parallel evaluates only its chosen side too.
inline DiffCase select_is_lazy() {
  DiffCase c;
  c.name = "SelectEvaluatesOnlyTheChosenSide";
  Dim N("N");
  Tensor A("A", {N}, f32), B("B", {N}, f32), O("O", {1}, f32);
  c.kernel = kernel("select_lazy", {A, B, O}, grid(ceildiv(N, 64)), threads(128), [&](Var bx) {
    parallel({64}, [&](Var i) {
      Expr g = bx * 64 + i;
      if_then(g < N, [&] { B(g) = select(g + 1 < N, A(g + 1), Expr(0.0)); });
    });
    if_then(bx == 0, [&] { O(0) = select(N > 1000, A(1000), A(0) + 100.0); });
  });
  c.args = {ints(f32, {100}, 5), sentinel(f32, {100}), sentinel(f32, {1})};
  c.outputs = {1, 2};
  c.expect = [](std::vector<HostTensor>& a) {
    int64_t n = a[0].numel();
    for (int64_t i = 0; i < n; ++i)
      a[1].set(i, i + 1 < n ? a[0].get(i + 1) : 0.0);
    a[2].set(0, a[0].get(0) + 100);
  };
  return c;
}

/// (d) Element access at rank 6 (loads and stores, inside and outside parallel).
inline DiffCase rank6_elements() {
  DiffCase c;
  c.name = "ElementAccessAtRankSix";
  Tensor A("A", {2, 2, 3, 2, 4, 5}, f32), B("B", {2, 2, 3, 2, 4, 5}, f32);
  c.kernel = kernel("rank6", {A, B}, grid(1), threads(128), [&](Var) {
    serial(2, [&](Var a) {
      serial(2, [&](Var b) {
        serial(3, [&](Var d) {
          parallel({2, 4, 5}, [&](Var i, Var j, Var k) {
            B(a, b, d, i, j, k) = A(a, b, d, i, j, k) * 2.0 + 1.0;
          });
        });
      });
    });
    B(1, 1, 2, 1, 3, 4) = A(0, 0, 0, 0, 0, 0) + A(1, 1, 2, 1, 3, 4);
  });
  c.args = {ints(f32, {2, 2, 3, 2, 4, 5}, 6), sentinel(f32, {2, 2, 3, 2, 4, 5})};
  c.outputs = {1};
  c.expect = [](std::vector<HostTensor>& a) {
    int64_t n = a[0].numel();
    for (int64_t i = 0; i < n; ++i)
      a[1].set(i, a[0].get(i) * 2 + 1);
    a[1].set(n - 1, a[0].get(0) + a[0].get(n - 1));
  };
  return c;
}

/// alloc_local: a per-thread tile, filled by a copy, a parallel loop and an element store, the
/// same in every thread, read in a parallel loop spread over the threads.
inline DiffCase local_tile() {
  DiffCase c;
  c.name = "LocalTileIsTheSameInEveryThread";
  Dim N("N");
  Tensor A("A", {N}, f32), W("W", {4}, f32), B("B", {N}, f32);
  c.kernel = kernel("local_tile", {A, W, B}, grid(ceildiv(N, 64)), threads(128), [&](Var bx) {
    Tile L = alloc_local({4}, f32);
    copy(W.tile(std::vector<Expr>{0}, {4}), L);
    parallel({4}, [&](Var i) { L(i) = L(i) * 2.0; });
    L(0) = L(0) + 1.0;
    parallel({64}, [&](Var i) {
      Expr g = bx * 64 + i;
      if_then(g < N, [&] { B(g) = A(g) + L(i % 4); });
    });
  });
  c.args = {ints(f32, {150}, 9), ints(f32, {4}, 10), sentinel(f32, {150})};
  c.outputs = {2};
  c.expect = [](std::vector<HostTensor>& a) {
    double L[4];
    for (int i = 0; i < 4; ++i)
      L[i] = a[1].get(i) * 2;
    L[0] += 1;
    for (int64_t g = 0; g < a[0].numel(); ++g)
      a[2].set(g, a[0].get(g) + L[g % 4]);
  };
  return c;
}

/// copy out of bounds: reads outside A give 0, writes outside C are dropped (A and C differ in
/// shape, the grid follows C).
inline DiffCase copy_out_of_bounds() {
  DiffCase c;
  c.name = "CopyReadsZeroAndDropsWritesOutOfBounds";
  Dim Ma("Ma"), Na("Na"), M("M"), N("N");
  Tensor A("A", {Ma, Na}, f32), C("C", {M, N}, f32);
  c.kernel = kernel("copy_oob", {A, C}, grid(ceildiv(N, 32), ceildiv(M, 32)), threads(128),
                    [&](Var bx, Var by) {
                      Tile S = alloc_shared({32, 32}, f32);
                      copy(A.tile(by * 32, bx * 32), S);
                      parallel({32, 32}, [&](Var i, Var j) { S(i, j) = S(i, j) + 1.0; });
                      copy(S, C.tile(by * 32, bx * 32));
                    });
  c.args = {ints(f32, {70, 40}, 11), sentinel(f32, {77, 45})};
  c.outputs = {1};
  c.expect = [](std::vector<HostTensor>& a) {
    for (int64_t i = 0; i < 77; ++i)
      for (int64_t j = 0; j < 45; ++j)
        a[1].set(i * 45 + j, (i < 70 && j < 40 ? a[0].get(i * 40 + j) : 0.0) + 1);
  };
  return c;
}

/// An integer copy through an edge tile keeps every bit: words above 2^24 (which a float would
/// round) come through exactly, and reads past the end give integer 0.
inline DiffCase copy_integers_exactly() {
  DiffCase c;
  c.name = "IntegerCopyIsExactAtEdgeTiles";
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, i32), C("C", {M, N}, i32);
  c.kernel = kernel("copy_i32", {A, C}, grid(ceildiv(N, 32), ceildiv(M, 16)), threads(128),
                    [&](Var bx, Var by) {
                      Tile F = alloc_fragment({16, 32}, i32);
                      copy(A.tile(by * 16, bx * 32), F);
                      copy(F, C.tile(by * 16, bx * 32));
                    });
  HostTensor a(i32, {21, 45});
  for (int64_t i = 0; i < a.numel(); ++i)
    a.set(i, static_cast<double>(16777217 + 2 * i) * (i % 2 ? -1 : 1)); // odd, above 2^24
  c.args = {a, sentinel(i32, {21, 45})};
  c.outputs = {1};
  c.expect = [](std::vector<HostTensor>& x) {
    for (int64_t i = 0; i < x[0].numel(); ++i)
      x[1].set(i, x[0].get(i));
  };
  return c;
}

/// bitcast reinterprets 32 bits both ways, and the float trick that turns a 4-bit code into an
/// f32 without an int-to-float conversion ((c | 0x4B000000) as f32 is 2^23 + c) gives the code.
inline DiffCase bitcast_bits() {
  DiffCase c;
  c.name = "BitcastReinterpretsBits";
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, i32), X("X", {M, N}, f32);
  Tensor F("F", {M, N}, f32), I("I", {M, N}, i32), T("T", {M, N}, f32);
  c.kernel = kernel("bitcast", {A, X, F, I, T}, grid(ceildiv(N, 32), ceildiv(M, 16)), threads(128),
                    [&](Var bx, Var by) {
                      Tile a = alloc_fragment({16, 32}, i32), x = alloc_fragment({16, 32}, f32);
                      Tile f = alloc_fragment({16, 32}, f32), b = alloc_fragment({16, 32}, i32);
                      Tile t = alloc_fragment({16, 32}, f32);
                      copy(A.tile(by * 16, bx * 32), a);
                      copy(X.tile(by * 16, bx * 32), x);
                      parallel({16, 32}, [&](Var i, Var j) {
                        f(i, j) = bitcast(f32, a(i, j));
                        b(i, j) = bitcast(i32, x(i, j));
                        t(i, j) = bitcast(f32, (a(i, j) & 15) | 0x4B000000) - 8388608.0f;
                      });
                      copy(f, F.tile(by * 16, bx * 32));
                      copy(b, I.tile(by * 16, bx * 32));
                      copy(t, T.tile(by * 16, bx * 32));
                    });
  const int32_t words[] = {
      0x3F800000, static_cast<int32_t>(0xBF800000), 0x4B000005, 0x00000001, 0x7F7FFFFF,
      0,          static_cast<int32_t>(0xC0490FDB), 123456789};
  const float floats[] = {1.0f, -2.5f, 0.0f, -0.0f, 3.4e38f, -1.0e-3f, 65504.0f, 7.0f};
  HostTensor a(i32, {21, 45}), x(f32, {21, 45});
  for (int64_t i = 0; i < a.numel(); ++i) {
    a.set(i, words[i % 8] + static_cast<int32_t>(i / 8) * (i % 8 == 7 ? 1 : 0));
    x.set(i, floats[(i * 3) % 8]);
  }
  c.args = {a, x, sentinel(f32, {21, 45}), sentinel(i32, {21, 45}), sentinel(f32, {21, 45})};
  c.outputs = {2, 3, 4};
  c.expect = [](std::vector<HostTensor>& v) {
    for (int64_t i = 0; i < v[0].numel(); ++i) {
      const auto w = static_cast<int32_t>(v[0].get(i));
      float f;
      std::memcpy(&f, &w, sizeof f);
      v[2].set(i, f);
      const auto g = static_cast<float>(v[1].get(i));
      int32_t bits;
      std::memcpy(&bits, &g, sizeof bits);
      v[3].set(i, bits);
      v[4].set(i, w & 15);
    }
  };
  return c;
}

/// fill of a tile and of a region of it, stored through an edge tile.
inline DiffCase fill_region() {
  DiffCase c;
  c.name = "FillWritesExactlyItsRegion";
  Dim M("M"), N("N");
  Tensor C("C", {M, N}, f32);
  c.kernel = kernel("fill_region", {C}, grid(ceildiv(N, 32), ceildiv(M, 32)), threads(128),
                    [&](Var bx, Var by) {
                      Tile S = alloc_shared({32, 32}, f32);
                      fill(S, Expr(1.0));
                      fill(S.region({4, 6}, {8, 5}), Expr(5.0));
                      copy(S, C.tile(by * 32, bx * 32));
                    });
  c.args = {sentinel(f32, {50, 40})};
  c.outputs = {0};
  c.expect = [](std::vector<HostTensor>& a) {
    for (int64_t i = 0; i < 50; ++i)
      for (int64_t j = 0; j < 40; ++j) {
        int64_t r = i % 32, q = j % 32;
        a[0].set(i * 40 + j, r >= 4 && r < 12 && q >= 6 && q < 11 ? 5.0 : 1.0);
      }
  };
  return c;
}

/// reduce along rows: a sum into a fragment (stored through an edge tile), a max into a local
/// tile (read back element-wise); rows past the tensor's end read 0 and are not stored.
inline DiffCase reduce_rows() {
  DiffCase c;
  c.name = "ReduceSumAndMaxAlongRows";
  Dim M("M");
  Tensor A("A", {M, 48}, f32), R("R", {M}, f32), X("X", {M}, f32);
  c.kernel = kernel("reduce_rows", {A, R, X}, grid(ceildiv(M, 32)), threads(128), [&](Var bx) {
    Tile S = alloc_shared({32, 48}, f32);
    copy(A.tile(bx * 32, 0), S);
    Tile r = alloc_fragment({32}, f32);
    reduce_sum(S, r, 1);
    copy(r, R.tile(bx * 32));
    Tile m = alloc_local({32}, f32);
    reduce_max(S, m, 1);
    parallel({32}, [&](Var i) {
      Expr g = bx * 32 + i;
      if_then(g < M, [&] { X(g) = m(i); });
    });
  });
  c.args = {ints(f32, {50, 48}, 12), sentinel(f32, {50}), sentinel(f32, {50})};
  c.outputs = {1, 2};
  c.expect = [](std::vector<HostTensor>& a) {
    for (int64_t i = 0; i < 50; ++i) {
      double s = 0, mx = -INFINITY;
      for (int64_t j = 0; j < 48; ++j) {
        s += a[0].get(i * 48 + j);
        mx = std::fmax(mx, a[0].get(i * 48 + j));
      }
      a[1].set(i, s);
      a[2].set(i, mx);
    }
  };
  return c;
}

/// c = (a + b) * 0.5 over 32 x 128 bf16 tiles (16-byte runs) at a size whose rows start at
/// every alignment (N odd: the loads take two aligned blocks and a shift, the tensor's last runs
/// and the stores 8-, 4-byte or element accesses) and whose last tiles are ragged in both
/// dimensions; the f32 output takes 32-byte runs.
inline DiffCase vector_copy_case(const std::string& name, int64_t rows, int64_t cols) {
  DiffCase c;
  c.name = name;
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {M, N}, bf16), C("C", {M, N}, f32), D("D", {M, N}, bf16);
  c.kernel =
      kernel("vcopy_" + name, {A, B, C, D}, grid(ceildiv(N, 128), ceildiv(M, 32)), threads(128),
             [&](Var bx, Var by) {
               Tile a = alloc_fragment({32, 128}, bf16), b = alloc_fragment({32, 128}, bf16);
               Tile s = alloc_fragment({32, 128}, f32);
               copy(A.tile(by * 32, bx * 128), a);
               copy(B.tile(by * 32, bx * 128), b);
               parallel({32, 128}, [&](Var i, Var j) { s(i, j) = (a(i, j) + b(i, j)) * 0.5; });
               copy(s, C.tile(by * 32, bx * 128));
               copy(s, D.tile(by * 32, bx * 128));
             });
  c.args = {ints(bf16, {rows, cols}, 1), ints(bf16, {rows, cols}, 2), sentinel(f32, {rows, cols}),
            sentinel(bf16, {rows, cols})};
  c.outputs = {2, 3};
  c.expect = [](std::vector<HostTensor>& a) {
    for (int64_t e = 0; e < a[0].numel(); ++e) {
      double v = (a[0].get(e) + a[1].get(e)) * 0.5; // halves of small integers: exact in bf16
      a[2].set(e, v);
      a[3].set(e, v);
    }
  };
  return c;
}

/// Transposes through shared tiles read down their columns, which ChooseSharedSwizzles swizzles
/// (their 16-byte units XORed by a function of the row): B = A^T in bf16 from one 64 x 64 tile
/// into a second (shared to shared, then whole 16-byte blocks out), and G = F^T in f32 from a
/// 64 x 64 tile into a fragment. Odd sizes give edge tiles and rows at every alignment.
inline DiffCase swizzled_shared_transposes() {
  DiffCase c;
  c.name = "SharedTilesSwizzledForColumnReads";
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {N, M}, bf16), F("F", {M, N}, f32), G("G", {N, M}, f32);
  c.kernel = kernel("swizzled_transposes", {A, B, F, G}, grid(ceildiv(N, 64), ceildiv(M, 64)),
                    threads(128), [&](Var bx, Var by) {
                      Tile s = alloc_shared({64, 64}, bf16), u = alloc_shared({64, 64}, bf16);
                      copy(A.tile(by * 64, bx * 64), s);
                      parallel({64, 64}, [&](Var i, Var j) { u(i, j) = s(j, i); });
                      copy(u, B.tile(bx * 64, by * 64));
                      Tile f = alloc_shared({64, 64}, f32), g = alloc_fragment({64, 64}, f32);
                      copy(F.tile(by * 64, bx * 64), f);
                      parallel({64, 64}, [&](Var i, Var j) { g(i, j) = f(j, i); });
                      copy(g, G.tile(bx * 64, by * 64));
                    });
  const int64_t rows = 77, cols = 133;
  c.args = {ints(bf16, {rows, cols}, 1), sentinel(bf16, {cols, rows}), ints(f32, {rows, cols}, 2),
            sentinel(f32, {cols, rows})};
  c.outputs = {1, 3};
  c.expect = [rows, cols](std::vector<HostTensor>& a) {
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t n = 0; n < cols; ++n) {
        a[1].set(n * rows + m, a[0].get(m * cols + n));
        a[3].set(n * rows + m, a[2].get(m * cols + n));
      }
  };
  return c;
}

inline DiffCase vector_copy_odd() {
  return vector_copy_case("VectorCopyAtOddSizes", 97, 1031);
}

inline DiffCase vector_copy_aligned() {
  return vector_copy_case("VectorCopyAligned", 64, 512);
}

/// Parallel loops spread over the threads that compute 16-bit shared tiles column by column
/// (passes/PairSharedWrites.h: runs of adjacent columns a thread, one store a run): a bf16 tile
/// 64 wide (runs of 8, read from another shared tile in runs), an f16 tile 12 wide (runs of 4)
/// and a bf16 tile 6 wide (runs of 2), each copied out. Values: a small integer x 2 + 1, x / 4 and
/// x - 3, exact in both types.
inline DiffCase shared_column_pairs() {
  DiffCase c;
  c.name = "SharedTileWrittenInColumnPairs";
  Dim M("M"), N("N"), N4("N4"), N2("N2");
  Tensor X("X", {M, N}, bf16), Y("Y", {M, N}, bf16), Z("Z", {M, N4}, f16), G("G", {M, N2}, bf16);
  c.kernel = kernel("shared_pairs", {X, Y, Z, G}, grid(ceildiv(N, 64), ceildiv(M, 16)),
                    threads(128), [&](Var bx, Var by) {
                      Tile s = alloc_shared({16, 64}, bf16), h = alloc_shared({16, 12}, f16);
                      Tile g = alloc_shared({16, 6}, bf16), u = alloc_shared({16, 64}, bf16);
                      copy(X.tile(by * 16, bx * 64), u);
                      // Reads u in runs of 8 too: one vector load a run.
                      parallel({16, 64}, [&](Var i, Var j) {
                        Var x = let("x", cast(f32, u(i, j)));
                        s(i, j) = x * 2.0 + 1.0;
                      });
                      parallel({16, 12}, [&](Var i, Var j) {
                        h(i, j) = cast(f32, X(by * 16 + i, bx * 64 + j)) * 0.25;
                      });
                      parallel({16, 6}, [&](Var i, Var j) {
                        g(i, j) = cast(f32, X(by * 16 + i, bx * 64 + j)) - 3.0;
                      });
                      copy(s, Y.tile(by * 16, bx * 64));
                      copy(h, Z.tile(by * 16, bx * 12));
                      copy(g, G.tile(by * 16, bx * 6));
                    });
  c.args = {ints(bf16, {32, 128}, 3), sentinel(bf16, {32, 128}), sentinel(f16, {32, 24}),
            sentinel(bf16, {32, 12})};
  c.outputs = {1, 2, 3};
  c.expect = [](std::vector<HostTensor>& a) {
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t col = 0; col < 128; ++col) {
        const double x = a[0].get(r * 128 + col);
        a[1].set(r * 128 + col, x * 2 + 1);
        if (col % 64 < 12) a[2].set(r * 24 + (col / 64) * 12 + col % 64, x * 0.25);
        if (col % 64 < 6) a[3].set(r * 12 + (col / 64) * 6 + col % 64, x - 3);
      }
  };
  return c;
}

/// Runs of shared writes whose values are small integers times 16-bit values (an int4 GEMM's
/// unpacking, (code - 8) * scale), small integers alone and exact 16-bit values: on CUDA they
/// are computed two at a time in packed bf16 / f16 arithmetic (passes/PackedProducts.h), which
/// must give the bits of the f32 value rounded once. Every code 0..15 (the words are raw 32-bit
/// draws), scales that make every product round, subnormal scales and products near the top of
/// each type's range.
inline DiffCase shared_packed_products() {
  DiffCase c;
  c.name = "SharedTileWrittenAsPackedProducts";
  Dim R("R"), N("N"), R8("R8");
  Tensor W("W", {R, N}, i32), S("S", {N}, bf16), H("H", {N}, f16);
  Tensor Yb("Yb", {R8, N}, bf16), Yh("Yh", {R8, N}, f16), Yc("Yc", {R8, N}, bf16);
  Tensor Ye("Ye", {R, N}, bf16);
  auto centred = [](const Expr& code) { return bitcast(f32, code | 0x4B000000) - 8388616.0f; };
  c.kernel = kernel("packed_products", {W, S, H, Yb, Yh, Yc, Ye},
                    grid(ceildiv(N, 64), ceildiv(R, 2)), threads(128), [&](Var bx, Var by) {
                      Tile sb = alloc_shared({16, 64}, bf16), sh = alloc_shared({16, 64}, f16);
                      Tile sc = alloc_shared({16, 64}, bf16), se = alloc_shared({2, 64}, bf16);
                      parallel({2, 64}, [&](Var r, Var j) {
                        Var w = let("w", W(by * 2 + r, bx * 64 + j));
                        Var s = let("s", cast(f32, S(bx * 64 + j)));
                        Var h = let("h", cast(f32, H(bx * 64 + j)));
                        for (int i = 0; i < 8; ++i) {
                          Expr code = (w >> (4 * i)) & 15;
                          sb(r * 8 + i, j) = centred(code) * s;
                          sh(r * 8 + i, j) = h * centred(code);
                          // Fields 2 bits up: rows 0, 2, 4, 6 inside a byte (gathered by byte, then
                          // shifted), rows 1, 3, 5, 7 across bytes (row 7's reaches the sign fill).
                          sc(r * 8 + i, j) = cast(f32, (w >> (4 * i + 2)) & 15);
                        }
                        se(r, j) = s;
                      });
                      copy(sb, Yb.tile(by * 16, bx * 64));
                      copy(sh, Yh.tile(by * 16, bx * 64));
                      copy(sc, Yc.tile(by * 16, bx * 64));
                      copy(se, Ye.tile(by * 2, bx * 64));
                    });
  const int64_t R_ = 4, N_ = 128;
  HostTensor words(i32, {R_, N_}), sb(bf16, {N_}), sh(f16, {N_});
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int64_t k = 0; k < words.numel(); ++k) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    static_cast<uint32_t*>(words.data())[k] = static_cast<uint32_t>(x >> 32);
  }
  for (int64_t n = 0; n < N_; ++n) {
    const double v = ((n * 37) % 97 - 48) / 7.3;
    sb.set(n, v);
    sh.set(n, v);
  }
  sb.set(5, 1e-39); // bf16 subnormals
  sb.set(6, -3e-40);
  sb.set(7, 3.0e37); // times 8: near bf16's largest value
  sh.set(5, 6e-8);   // f16 subnormals
  sh.set(6, -1e-5);
  sh.set(7, 8100.0); // times 8: near f16's largest value
  c.args = {words,
            sb,
            sh,
            sentinel(bf16, {R_ * 8, N_}),
            sentinel(f16, {R_ * 8, N_}),
            sentinel(bf16, {R_ * 8, N_}),
            sentinel(bf16, {R_, N_})};
  c.outputs = {3, 4, 5, 6};
  c.expect = [](std::vector<HostTensor>& a) {
    const auto* w = static_cast<const uint32_t*>(a[0].data());
    for (int64_t q = 0; q < 4; ++q)
      for (int64_t n = 0; n < 128; ++n) {
        for (int i = 0; i < 8; ++i) {
          const double code = double((w[q * 128 + n] >> (4 * i)) & 15u);
          const int64_t at = (q * 8 + i) * 128 + n;
          a[3].set(at, (code - 8) * a[1].get(n)); // exact in double, rounded once by set
          a[4].set(at, (code - 8) * a[2].get(n));
          a[5].set(at, double((static_cast<int32_t>(w[q * 128 + n]) >> (4 * i + 2)) & 15));
        }
        a[6].set(q * 128 + n, a[1].get(n));
      }
  };
  return c;
}

/// Copies between a 4-d box and a 2-d tile pair elements in row-major order, the box's outer
/// dimensions flattened: tile row r is box row r / 8, box column r % 8. Global -> shared (then
/// out as a plain 2-d tile, converted to f32), global -> fragment, and fragment -> global box.
/// The boxes start at -1 and run past the tensor's edge: those elements read 0 and their writes
/// are dropped (Z is written exactly once per element, so a write that leaks shows).
inline DiffCase copy_flattens_outer_dimensions() {
  DiffCase c;
  c.name = "CopyFlattensOuterDimensionsRowMajor";
  Dim Nb("Nb"), P("P");
  Tensor X("X", {Nb, 5, 6, 16}, bf16), Y("Y", {P, 16}, f32), Z("Z", {Nb, 5, 6, 16}, f32);
  c.kernel = kernel("copy_regroup", {X, Y, Z}, grid(3, Nb), threads(128), [&](Var bx, Var by) {
    Tile S = alloc_shared({16, 16}, bf16);
    copy(X.tile({by, bx * 2 - 1, -1, 0}, {1, 2, 8, 16}), S);
    copy(S, Y.tile(by * 48 + bx * 16, 0));
    Tile F = alloc_fragment({16, 16}, f32);
    copy(X.tile({by, bx * 2 - 1, -1, 0}, {1, 2, 8, 16}), F);
    copy(F, Z.tile({by, bx * 2 - 1, -1, 0}, {1, 2, 8, 16}));
  });
  c.args = {ints(bf16, {2, 5, 6, 16}, 47), sentinel(f32, {96, 16}), sentinel(f32, {2, 5, 6, 16})};
  c.outputs = {1, 2};
  c.expect = [](std::vector<HostTensor>& a) {
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t r = 0; r < 16; ++r)
          for (int64_t ch = 0; ch < 16; ++ch) {
            int64_t h = 2 * b - 1 + r / 8, w = r % 8 - 1;
            bool in = h >= 0 && h < 5 && w >= 0 && w < 6;
            double v = in ? a[0].get(((n * 5 + h) * 6 + w) * 16 + ch) : 0.0;
            a[1].set((n * 48 + b * 16 + r) * 16 + ch, v);
          }
    for (int64_t i = 0; i < a[0].numel(); ++i)
      a[2].set(i, a[0].get(i));
  };
  return c;
}

/// Whole 16-bit shared tiles copied to global rows that start anywhere in a 16-byte block
/// (LowerCopy's block_store: aligned 16-byte blocks of the destination, gathered from shared,
/// partial blocks at a row's ends element by element): a 16 x 64 tile to an odd-width tensor
/// with ragged edge tiles, the same tile 5 columns into a wider tensor (the columns before stay
/// untouched), a 1-d tile of 128 to an odd length, and an f32 fragment written into a bf16
/// shared tile in runs (sts_vec) on its way out. Every value is copied exactly.
inline DiffCase shared_tile_block_stores() {
  DiffCase c;
  c.name = "SharedTileStoredInAlignedBlocks";
  Dim M("M"), N("N"), N5("N5"), L("L");
  Tensor X("X", {M, N}, bf16), Y("Y", {M, N}, bf16), Z("Z", {M, N5}, bf16);
  Tensor V("V", {L}, f16), W("W", {L}, f16), F("F", {M, N}, bf16);
  c.kernel = kernel("block_stores", {X, Y, Z, V, W, F}, grid(ceildiv(N, 64), ceildiv(M, 16)),
                    threads(128), [&](Var bx, Var by) {
                      Tile s = alloc_shared({16, 64}, bf16), v = alloc_shared({128}, f16);
                      Tile f = alloc_fragment({16, 64}, f32), t = alloc_shared({16, 64}, bf16);
                      copy(X.tile(by * 16, bx * 64), s);
                      copy(s, Y.tile(by * 16, bx * 64));
                      copy(s, Z.tile(by * 16, bx * 64 + 5));
                      copy(V.tile((by * ceildiv(N, 64) + bx) * 128), v);
                      copy(v, W.tile((by * ceildiv(N, 64) + bx) * 128));
                      copy(X.tile(by * 16, bx * 64), f);
                      copy(f, t);
                      copy(t, F.tile(by * 16, bx * 64));
                    });
  const int64_t m = 37, n = 203, l = 3 * 4 * 128 - 93; // grid 4 x 3; the last tile of V ragged
  c.args = {ints(bf16, {m, n}, 1), sentinel(bf16, {m, n}), sentinel(bf16, {m, n + 5}),
            ints(f16, {l}, 2),     sentinel(f16, {l}),     sentinel(bf16, {m, n})};
  c.outputs = {1, 2, 4, 5};
  c.expect = [m, n, l](std::vector<HostTensor>& a) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        a[1].set(i * n + j, a[0].get(i * n + j));
        a[2].set(i * (n + 5) + j + 5, a[0].get(i * n + j));
        a[5].set(i * n + j, a[0].get(i * n + j));
      }
    for (int64_t e = 0; e < l; ++e)
      a[4].set(e, a[3].get(e));
  };
  return c;
}

/// Element-wise stores the compiler stages through shared tiles (passes/StageUnalignedStores.h;
/// the kernel asks, the pass being off by default) at rows of every alignment: one f32 fragment
/// stored to two bf16 tensors (two staged tiles), the second 3 columns in, inside a serial loop
/// over two row blocks (the staged tiles are written again in the next trip, so the block store's
/// reads must end before). 16 x 128 over 128 threads: 16 elements a thread. Values x * 0.5 + 1 of
/// small integers: exact in bf16.
inline DiffCase staged_stores_in_a_loop() {
  DiffCase c;
  c.name = "StagedStoresInALoop";
  Dim M("M"), N("N"), N3("N3");
  Tensor A("A", {M, N}, bf16), D("D", {M, N}, bf16), E("E", {M, N3}, bf16);
  c.kernel = kernel(
      "staged_stores", {A, D, E}, grid(ceildiv(N, 128), ceildiv(M, 32)), threads(128),
      [&](Var bx, Var by) {
        annotate("staged_stores", "1");
        Tile a = alloc_fragment({16, 128}, bf16), s = alloc_fragment({16, 128}, f32);
        serial(2, [&](Var r) {
          Expr row = by * 32 + r * 16;
          copy(A.tile(row, bx * 128), a);
          parallel({16, 128}, [&](Var i, Var j) { s(i, j) = cast(f32, a(i, j)) * 0.5 + 1.0; });
          copy(s, D.tile(row, bx * 128));
          copy(s, E.tile(row, bx * 128 + 3));
        });
      });
  const int64_t m = 45, n = 331; // rows at every alignment; ragged last tiles both ways
  c.args = {ints(bf16, {m, n}, 1), sentinel(bf16, {m, n}), sentinel(bf16, {m, n + 3})};
  c.outputs = {1, 2};
  c.expect = [m, n](std::vector<HostTensor>& a) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double v = a[0].get(i * n + j) * 0.5 + 1.0;
        a[1].set(i * n + j, v);
        a[2].set(i * (n + 3) + j + 3, v);
      }
  };
  return c;
}

} // namespace tp::difftest
