// Lesson 1: a tile copy. Each block copies one 32x64 tile of A through shared memory into B,
// converting bf16 to f32 on the way; edge blocks read zeros past the end of A and drop writes
// past the end of B. Run: build/example_01_tile_copy
#include <cstdio>

#include "codegen/cpu/Interpreter.h"
#include "ir/IRPrinter.h"
#include "tilepilot/tilepilot.h"

using namespace tp;

Kernel tile_copy(int64_t bm, int64_t bn) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {M, N}, f32);
  return kernel("tile_copy", {A, B}, grid(ceildiv(N, bn), ceildiv(M, bm)), threads(128),
                [&](Var bx, Var by) {
    Tile t = alloc_shared({bm, bn}, bf16);
    copy(A.tile(by * bm, bx * bn), t); // global -> shared
    copy(t, B.tile(by * bm, bx * bn)); // shared -> global, bf16 -> f32
  });
}

int main() {
  Kernel k = tile_copy(32, 64);
  std::printf("%s\n", ir::to_string(k.node()).c_str());
  HostTensor a(bf16, {100, 130}), b(f32, {100, 130});
  a.fill_random(1);
  b.poison();
  cpu::interpret(k, {&a, &b});
  int64_t wrong = 0;
  for (int64_t i = 0; i < a.numel(); ++i) wrong += a.get(i) != b.get(i);
  std::printf("copied %lld elements, %lld wrong\n", static_cast<long long>(a.numel()),
              static_cast<long long>(wrong));
  return wrong == 0 ? 0 : 1;
}
