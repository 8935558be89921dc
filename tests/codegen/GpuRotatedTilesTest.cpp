// Rotated tiles on the GPU (passes/PlanRotation.h): a warp-specialized loop whose element-wise
// work unpacks packed words into the shared B tile of its gemm, with that tile in two buffers
// used in turn, writes exactly what the interpreter writes (one buffer, in order). Trip counts
// from one iteration (no rotation happens) to seven (each buffer reused three times, every
// pipeline stage refilled), ragged M and N, and both tile widths. Inputs are small integers and
// 4-bit codes, so every f32 sum is exact.
#include <gtest/gtest.h>

#include <random>

#include <tilepilot/tilepilot.h>

#include "DifferentialCases.h"

using namespace tp;
using namespace tp::difftest;

namespace {

Kernel unpack_gemm(int64_t bn) {
  Dim M("M"), N("N"), K("K"), KW("KW");
  Tensor A("A", {M, K}, bf16), W("W", {KW, N}, i32), C("C", {M, N}, f32);
  return kernel("rotated_unpack_gemm", {A, W, C}, grid(ceildiv(N, bn), ceildiv(M, 128)),
                threads(256), [&](Var bx, Var by) {
                  Tile as = alloc_shared({128, 64}, bf16), bs = alloc_shared({64, bn}, bf16);
                  Tile ws = alloc_shared({8, bn}, i32);
                  Tile acc = alloc_fragment({128, bn}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, 64), 3, [&](Var k) {
                    copy(A.tile(by * 128, k * 64), as);
                    copy(W.tile(k * 8, bx * bn), ws);
                    parallel({8, bn}, [&](Var r, Var j) {
                      Var w = let("w", ws(r, j));
                      for (int i = 0; i < 8; ++i)
                        bs(r * 8 + i, j) = cast(f32, ((w >> (4 * i)) & 15) - 8);
                    });
                    gemm(as, bs, acc);
                  });
                  copy(acc, C.tile(by * 128, bx * bn));
                });
}

HostTensor words(int64_t rows, int64_t cols, uint32_t seed) {
  HostTensor t(i32, {rows, cols});
  std::mt19937 gen(seed);
  auto* w = static_cast<uint32_t*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i)
    w[i] = gen();
  return t;
}

} // namespace

TEST(GpuRotatedTiles, UnpackedOperandInTwoBuffersMatchesTheInterpreter) {
  for (int64_t bn : {128, 256}) {
    Kernel k = unpack_gemm(bn);
    CompiledKernel ck = compile(k);
    // The plan this test exists for: without rotation it would test nothing new.
    ASSERT_NE(ck.lowered().find("// rotated: 1 shared tile"), std::string::npos) << bn;
    struct Shape {
      int64_t M, N, K;
    };
    for (const Shape& s :
         {Shape{128, 128, 64}, Shape{256, 256, 128}, Shape{130, 200, 192}, Shape{128, 384, 448}}) {
      HostTensor a = ints(bf16, {s.M, s.K}, 3), w = words(s.K / 8, s.N, 11);
      HostTensor c = sentinel(f32, {s.M, s.N});
      HostTensor want = c;
      interpret(k, {a, w, want});
      DeviceArray da = DeviceArray::from(a), dw = DeviceArray::from(w), dc = DeviceArray::from(c);
      ck.launch({da, dw, dc});
      synchronize();
      EXPECT_EQ(first_mismatch(dc.to_host(), want, 0), "")
          << "bn " << bn << " M " << s.M << " N " << s.N << " K " << s.K;
    }
  }
}
