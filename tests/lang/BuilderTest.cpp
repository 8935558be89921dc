#include <gtest/gtest.h>

#include "codegen/cpu/Interpreter.h"
#include "ir/IRPrinter.h"
#include "tilepilot/tilepilot.h"
#include "tilepilot/tensor.h"

using namespace tp;

TEST(Builder, CopyKernelRoundTrips) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {M, N}, f32);
  Kernel k = kernel("copy", {A, B}, grid(ceildiv(N, 32), ceildiv(M, 16)), threads(128),
                    [&](Var bx, Var by) {
                      Tile t = alloc_shared({16, 32}, bf16);
                      copy(A.tile(by * 16, bx * 32), t);
                      copy(t, B.tile(by * 16, bx * 32));
                    });
  std::cout << ir::to_string(k.node()) << "\n";
  HostTensor a(DType::bf16, {37, 45}), b(DType::f32, {37, 45});
  a.fill_random(1);
  b.poison();
  cpu::interpret(k, {&a, &b});
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.get(i), b.get(i)) << i;
}
