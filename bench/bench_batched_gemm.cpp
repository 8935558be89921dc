// Batched GEMM (examples/10's kernel, C[b] = A[b] B[b], the batch as grid z) at several configs,
// side by side in one process with the plain GEMM of the same tiles, K and FLOPs
// (16 x 1024^3 against 4096 x 4096 x 1024: 512 tiles of 128 x 256 each). It tells whether the
// batched kernel loses to its batching or to the problem's size (few k-steps a tile, 3.9 waves),
// and what persistence and tile shape change. bf16 in and out, f32 accumulate, L2 flushed,
// median of 20. The results are not checked here (lesson 10 checks them).
// Usage: bench_batched_gemm
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <tilepilot/tilepilot.h>

using namespace tp;

namespace {

struct Config {
  int64_t bm, bn, bk;
  int stages, threads;
  bool persistent;
  std::string str() const {
    return std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) + " s" +
           std::to_string(stages) + " t" + std::to_string(threads) +
           (persistent ? " persistent" : "");
  }
};

/// batched: A [batch, M, K], B [batch, K, N], C [batch, M, N]; plain: the same without batch.
Kernel gemm(const Config& c, bool batched) {
  Dim Bt("batch"), M("M"), N("N"), K("K");
  auto shape = [&](Expr r, Expr col) {
    return batched ? std::vector<Expr>{Bt, r, col} : std::vector<Expr>{r, col};
  };
  Tensor A("A", shape(M, K), bf16), B("B", shape(K, N), bf16), C("C", shape(M, N), bf16);
  auto body = [&](Var bx, Var by, Var b) {
    if (c.persistent) annotate("persistent", "1");
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      copy(batched ? A.tile(b, by * c.bm, k * c.bk) : A.tile(by * c.bm, k * c.bk), As);
      copy(batched ? B.tile(b, k * c.bk, bx * c.bn) : B.tile(k * c.bk, bx * c.bn), Bs);
      gemm(As, Bs, acc);
    });
    copy(acc, batched ? C.tile(b, by * c.bm, bx * c.bn) : C.tile(by * c.bm, bx * c.bn));
  };
  if (batched)
    return kernel("batched_gemm", {A, B, C}, grid(ceildiv(N, c.bn), ceildiv(M, c.bm), Bt),
                  threads(c.threads), body);
  return kernel("plain_gemm", {A, B, C}, grid(ceildiv(N, c.bn), ceildiv(M, c.bm)),
                threads(c.threads), [&](Var bx, Var by) { body(bx, by, Var("unused")); });
}

void run(const Config& c, bool batched) {
  const int64_t G = 16, S = 1024;
  std::vector<std::vector<int64_t>> shapes =
      batched ? std::vector<std::vector<int64_t>>{{G, S, S}, {G, S, S}, {G, S, S}}
              : std::vector<std::vector<int64_t>>{{4 * S, S}, {S, 4 * S}, {4 * S, 4 * S}};
  try {
    CompiledKernel ck = compile(gemm(c, batched));
    std::vector<DeviceArray> arrays;
    for (const auto& s : shapes) {
      arrays.emplace_back(bf16, s);
      arrays.back().fill_bytes(0x3c);
    }
    std::vector<Arg> args(arrays.begin(), arrays.end());
    ck.launch(args);
    synchronize();
    TimeResult r = time(ck, args, {.runs = 20, .flush_l2 = true});
    double tflops = 2.0 * G * S * S * S / (r.median_ms * 1e-3) / 1e12;
    std::printf("%-8s %-32s %8.4f ms  %6.1f TFLOP/s  %3d regs\n", batched ? "batched" : "plain",
                c.str().c_str(), r.median_ms, tflops, ck.resources().registers);
  } catch (const std::exception& e) {
    std::printf("%-8s %-32s error: %s\n", batched ? "batched" : "plain", c.str().c_str(), e.what());
  }
  std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 1) {
    std::fprintf(stderr, "usage: %s\n", argv[0]);
    return 2;
  }
  std::string why;
  if (!gpu_available(&why)) {
    std::fprintf(stderr, "%s: needs a CUDA GPU: %s\n", argv[0], why.c_str());
    return 2;
  }
  const std::vector<Config> configs = {
      {128, 256, 64, 4, 256, false}, // lesson 10's
      {128, 256, 64, 4, 256, true},  {128, 256, 64, 3, 256, false}, {128, 128, 64, 4, 256, false},
      {128, 128, 64, 4, 256, true},  {128, 128, 64, 6, 256, false}, {256, 128, 64, 4, 256, false},
  };
  for (const Config& c : configs)
    for (bool batched : {true, false})
      run(c, batched);
  return 0;
}
