// What the GEMM's epilogue costs, and what TMA stores and persistence change: the plain GEMM
// (examples/07's kernel) side by side in one process as
//   - `registers`: the accumulator stored from registers, a pair of columns at a time
//     (annotate("tma_stores", "0"));
//   - `tma`: stored through shared memory by TMA (the sm_90a default, PlanTmaStores.h);
//   - `skipped`: the store never runs (under a test the launch never passes), an upper bound of
//     what any epilogue schedule can win;
// each with and without persistent blocks.
// bf16 in and out, f32 accumulate, L2 flushed, median of 20. Results are not checked here
// (lesson 07 checks the kernel); the skipped-store variant computes nothing it keeps.
// Usage: bench_gemm_epilogue [--compile]   (--compile: no GPU; ptxas' resources for sm_90a)
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include <tilepilot/tilepilot.h>

using namespace tp;

namespace {

enum class Epilogue { registers, tma, skipped };

struct Config {
  int64_t bm, bn;
  int stages;
  bool persistent;
  Epilogue epilogue;
  std::string str() const {
    const char* e = epilogue == Epilogue::registers ? "registers"
                    : epilogue == Epilogue::tma     ? "tma"
                                                    : "skipped";
    return std::to_string(bm) + "x" + std::to_string(bn) + " s" + std::to_string(stages) + " " + e +
           (persistent ? " persistent" : "");
  }
};

Kernel gemm(const Config& c) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, bf16);
  return kernel("gemm", {A, B, C}, grid(ceildiv(N, c.bn), ceildiv(M, c.bm)), threads(256),
                [&](Var bx, Var by) {
                  annotate("swizzle", "8");
                  if (c.persistent) annotate("persistent", "1");
                  if (c.epilogue == Epilogue::registers) annotate("tma_stores", "0");
                  Tile As = alloc_shared({c.bm, 64}, bf16), Bs = alloc_shared({64, c.bn}, bf16);
                  Tile acc = alloc_fragment({c.bm, c.bn}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, 64), c.stages, [&](Var k) {
                    copy(A.tile(by * c.bm, k * 64), As);
                    copy(B.tile(k * 64, bx * c.bn), Bs);
                    gemm(As, Bs, acc);
                  });
                  if (c.epilogue == Epilogue::skipped)
                    if_then(M < 0, [&] { copy(acc, C.tile(by * c.bm, bx * c.bn)); });
                  else
                    copy(acc, C.tile(by * c.bm, bx * c.bn));
                });
}

void run(const Config& c, int64_t M, int64_t N, int64_t K) {
  try {
    CompiledKernel ck = compile(gemm(c));
    std::vector<DeviceArray> arrays;
    for (std::vector<int64_t> s : {std::vector<int64_t>{M, K}, {K, N}, {M, N}}) {
      arrays.emplace_back(bf16, s);
      arrays.back().fill_bytes(0x3c);
    }
    std::vector<Arg> args(arrays.begin(), arrays.end());
    ck.launch(args);
    synchronize();
    TimeResult r = time(ck, args, {.runs = 20, .flush_l2 = true});
    double tflops = 2.0 * M * N * K / (r.median_ms * 1e-3) / 1e12;
    std::printf("%5lldx%5lldx%5lld %-30s %8.4f ms  %6.1f TFLOP/s  %3d regs  %6lld smem\n",
                (long long)M, (long long)N, (long long)K, c.str().c_str(), r.median_ms, tflops,
                ck.resources().registers, (long long)ck.resources().smem_dynamic);
  } catch (const std::exception& e) {
    std::printf("%-30s error: %s\n", c.str().c_str(), e.what());
  }
  std::fflush(stdout);
}

const std::vector<Config> kConfigs = {
    {128, 256, 4, false, Epilogue::registers},
    {128, 256, 4, false, Epilogue::tma},
    {128, 256, 4, false, Epilogue::skipped},
    {128, 256, 4, true, Epilogue::registers},
    {128, 256, 4, true, Epilogue::tma},
    {128, 256, 4, true, Epilogue::skipped},
    // the first two again: drift within the run
    {128, 256, 4, false, Epilogue::registers},
    {128, 256, 4, false, Epilogue::tma},
};

} // namespace

int main(int argc, char** argv) {
  const bool compile_only = argc == 2 && std::string(argv[1]) == "--compile";
  if (argc != 1 && !compile_only) {
    std::fprintf(stderr, "usage: %s [--compile]\n", argv[0]);
    return 2;
  }
  std::string why;
  if (!compile_only && !gpu_available(&why)) {
    std::fprintf(stderr, "%s: needs a CUDA GPU: %s\n", argv[0], why.c_str());
    return 2;
  }
  if (compile_only) {
    for (const Config& c : kConfigs) {
      try {
        Resources r = compile(gemm(c), {.arch = "sm_90a"}).resources();
        std::printf("%-30s %3d regs  %4d spill bytes  %6lld smem\n", c.str().c_str(), r.registers,
                    r.spill_bytes, (long long)r.smem_dynamic);
      } catch (const std::exception& e) {
        std::printf("%-30s error: %s\n", c.str().c_str(), e.what());
      }
    }
    return 0;
  }
  const std::vector<Config>& configs = kConfigs;
  for (auto [M, N, K] :
       {std::tuple{4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 28672, 4096}, {2048, 4096, 4096}})
    for (const Config& c : configs)
      run(c, M, N, K);
  return 0;
}
