// A user's program against the installed TilePilot package: builds a row-sum kernel, runs it on
// the CPU interpreter and checks it, then lowers and compiles it for sm_90a (NVRTC, no GPU
// needed) and, when a GPU is present, launches it and compares. Exit 0 when all of it passed.
#include <cmath>
#include <cstdio>

#include <tilepilot/tilepilot.h>

using namespace tp;

static Kernel row_sum() {
  Dim M("M"), N("N");
  Tensor X("X", {M, N}, f32), Y("Y", {M}, f32);
  return kernel("row_sum", {X, Y}, grid(ceildiv(M, 16)), threads(128), [&](Var bx) {
    Tile x = alloc_fragment({16, 64}, f32);
    Tile s = alloc_fragment({16}, f32);
    clear(s);
    serial(ceildiv(N, 64), [&](Var k) {
      copy(X.tile(bx * 16, k * 64), x);
      reduce_sum(x, s, 1, /*clear=*/false);
    });
    copy(s, Y.tile(bx * 16));
  });
}

int own_operator(); // OwnOperator.cpp

int main() {
  if (own_operator() != 0) return 1;
  Kernel k = row_sum();
  HostTensor x(f32, {37, 150}), y(f32, {37});
  x.fill_random(7);
  y.poison();
  interpret(k, {x, y});
  for (int64_t i = 0; i < 37; ++i) {
    double want = 0;
    for (int64_t j = 0; j < 150; ++j)
      want += x.get(i * 150 + j);
    if (std::fabs(y.get(i) - want) > 1e-4) {
      std::printf("interpreter: row %lld is %g, want %g\n", (long long)i, y.get(i), want);
      return 1;
    }
  }
  std::printf("interpreter: 37 rows correct\n");
  CompiledKernel ck = compile(k, {.arch = "sm_90a"});
  std::printf("sm_90a: %d registers, %zu bytes of PTX\n", ck.resources().registers,
              ck.ptx().size());
  if (!gpu_available()) return 0;
  CompiledKernel gk = compile(k);
  DeviceArray dx = DeviceArray::from(x), dy(f32, {37});
  gk.launch({dx, dy});
  synchronize();
  HostTensor got = dy.to_host();
  for (int64_t i = 0; i < 37; ++i)
    if (std::fabs(got.get(i) - y.get(i)) > 1e-4) return 1;
  std::printf("GPU: 37 rows agree with the interpreter\n");
  return 0;
}
