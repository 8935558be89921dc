// Lesson 10: batched and grouped GEMM, in bf16.
// Batched: C[b] = A[b] B[b] for b < batch, A [batch, M, K], B [batch, K, N], C [batch, M, N].
// The batch is the grid's third dimension; a tile of a rank-3 tensor with extent 1 in the batch
// dimension copies into a 2-D shared tile (unit dimensions drop out, in order), so the body is
// lesson 7's.
// Grouped (a mixture of experts' layout): group g owns rows [offs[g], offs[g + 1]) of the
// stacked A [rows, K] and C [rows, N] and has its own B[g] [K, N]; groups differ in size, some
// are empty. The host lists the row tiles, (group, first row, end row) each, and the grid
// walks that list, so no block is launched for nothing; rows past a tile's end are not stored.
// Teaches: rank-3 tensors, tiles that drop a unit dimension, the grid as the batch loop,
// data-dependent tiles read from a tensor, an element-wise guarded store.
// Run: build/example_10_batched_gemm         CPU interpreter, 3 x 77 x 45 x 133; groups of 37,
//                                            0, 64 and 5 rows
//      build/example_10_batched_gemm --gpu   H200: 16 x 1024^3; 16 groups of 512..1536 rows
//      build/example_10_batched_gemm --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

struct GemmConfig {
  int64_t bm, bn, bk;
  int stages, threads;
};

Kernel batched_gemm(const GemmConfig& c) {
  Dim Bt("batch"), M("M"), N("N"), K("K");
  Tensor A("A", {Bt, M, K}, bf16), B("B", {Bt, K, N}, bf16), C("C", {Bt, M, N}, bf16);
  auto body = [&](Var bx, Var by, Var b) {
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      copy(A.tile(b, by * c.bm, k * c.bk), As); // box [1, bm, bk] -> tile [bm, bk]
      copy(B.tile(b, k * c.bk, bx * c.bn), Bs);
      gemm(As, Bs, acc);
    });
    copy(acc, C.tile(b, by * c.bm, bx * c.bn));
  };
  return kernel("batched_gemm", {A, B, C}, grid(ceildiv(N, c.bn), ceildiv(M, c.bm), Bt),
                threads(c.threads), body);
}

Kernel grouped_gemm(const GemmConfig& c) {
  Dim R("rows"), G("groups"), T("tiles"), N("N"), K("K");
  Tensor A("A", {R, K}, bf16), B("B", {G, K, N}, bf16), C("C", {R, N}, bf16);
  Tensor tiles("tiles", {T, 3}, i32); // (group, first row, end row) of each bm-row tile
  auto body = [&](Var bx, Var t) {
    Expr g = tiles(t, 0), row0 = tiles(t, 1), row_end = tiles(t, 2);
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      copy(A.tile(row0, k * c.bk), As); // rows past row_end belong to the next group: unused
      copy(B.tile(g, k * c.bk, bx * c.bn), Bs);
      gemm(As, Bs, acc);
    });
    // later: copy(acc.region(...)) once fragment-region copies store exactly their region on
    // every backend; a copy of the whole tile would overwrite the next group's rows.
    // The host lists only tiles with rows, so most pairs of adjacent columns are stored
    // together: the kernel asks for paired stores in its accumulator loops (one 4-byte store per
    // two elements; 306 -> 411 TFLOP/s on the H100).
    annotate("paired_stores", "1");
    parallel({c.bm, c.bn}, [&](Var i, Var j) {
      Expr row = row0 + i, col = bx * c.bn + j;
      if_then(row < row_end && col < N, [&] { C(row, col) = acc(i, j); });
    });
  };
  return kernel("grouped_gemm", {A, B, tiles, C}, grid(ceildiv(N, c.bn), T), threads(c.threads),
                body);
}

std::vector<std::pair<int64_t, double>> reference(const HostTensor& a, const HostTensor& b,
                                                  const std::vector<int64_t>& at) {
  const int64_t M = a.shape()[1], K = a.shape()[2], N = b.shape()[2];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t i : at) {
    int64_t g = i / (M * N), m = i / N % M, n = i % N;
    double s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += a.get((g * M + m) * K + k) * b.get((g * K + k) * N + n);
    want.emplace_back(i, s);
  }
  return want;
}

// C rounds once to bf16 (2^-8 relative); f32 accumulation of K products adds ~K 2^-24.
constexpr double kAtol = 2e-3, kRtol = 1.0 / 128;

// A grouped problem: group sizes, their row offsets, and the host-side tile list.
struct Groups {
  std::vector<int64_t> offs; // groups + 1 entries
  HostTensor tiles;          // [tiles, 3] i32
};

Groups make_groups(const std::vector<int64_t>& sizes, int64_t bm) {
  Groups z;
  z.offs = {0};
  std::vector<int64_t> t;
  for (size_t g = 0; g < sizes.size(); ++g) {
    int64_t begin = z.offs.back(), end = begin + sizes[g];
    for (int64_t r = begin; r < end; r += bm)
      t.insert(t.end(), {int64_t(g), r, end});
    z.offs.push_back(end);
  }
  z.tiles = HostTensor(i32, {int64_t(t.size() / 3), 3});
  for (size_t i = 0; i < t.size(); ++i)
    z.tiles.set(i, double(t[i]));
  return z;
}

std::vector<std::pair<int64_t, double>> grouped_reference(const HostTensor& a, const HostTensor& b,
                                                          const Groups& z,
                                                          const std::vector<int64_t>& at) {
  const int64_t K = a.shape()[1], N = b.shape()[2];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t i : at) {
    int64_t r = i / N, n = i % N, g = 0;
    while (z.offs[g + 1] <= r)
      ++g;
    double s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += a.get(r * K + k) * b.get((g * K + k) * N + n);
    want.emplace_back(i, s);
  }
  return want;
}

bool run_grouped(const std::vector<int64_t>& sizes, int64_t N, int64_t K, const GemmConfig& c,
                 bool gpu) {
  Groups z = make_groups(sizes, c.bm);
  const int64_t G = sizes.size(), R = z.offs.back();
  HostTensor a(bf16, {R, K}), b(bf16, {G, K, N}), out(bf16, {R, N});
  a.fill_random(4);
  b.fill_random(5);
  if (!gpu) {
    out.poison();
    interpret(grouped_gemm(c), {a, b, z.tiles, out});
    return lesson::check("CPU grouped, rows 37 + 0 + 64 + 5, N 45, K 133", out,
                         grouped_reference(a, b, z, lesson::all(R * N)), kAtol, kRtol);
  }
  CompiledKernel ck = compile(grouped_gemm(c));
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b);
  DeviceArray dt = DeviceArray::from(z.tiles), dc(bf16, {R, N});
  dc.fill_bytes(0xff);
  std::vector<Arg> args = {da, db, dt, dc};
  ck.launch(args);
  synchronize();
  bool ok = lesson::check("GPU grouped (256 samples)", dc.to_host(),
                          grouped_reference(a, b, z, lesson::sample(R * N)), kAtol, kRtol);
  lesson::report_flops(time(ck, args, {.runs = 20, .flush_l2 = true}), 2.0 * R * N * K);
  return ok;
}

// 16 groups of 512..1536 rows, 16384 in all: the same work as the batched 16 x 1024^3.
std::vector<int64_t> gpu_group_sizes() {
  std::vector<int64_t> sizes;
  for (int64_t g = 0; g < 16; g += 2)
    sizes.insert(sizes.end(), {512 + 64 * g, 1536 - 64 * g});
  return sizes;
}

bool run_cpu() {
  const int64_t G = 3, M = 77, N = 45, K = 133;
  HostTensor a(bf16, {G, M, K}), b(bf16, {G, K, N}), c(bf16, {G, M, N});
  a.fill_random(1);
  b.fill_random(2);
  c.poison();
  interpret(batched_gemm({64, 64, 32, 2, 128}), {a, b, c});
  bool ok = lesson::check("CPU 3 x 77 x 45 x 133", c, reference(a, b, lesson::all(G * M * N)),
                          kAtol, kRtol);
  return run_grouped({37, 0, 64, 5}, 45, 133, {32, 32, 32, 2, 128}, false) && ok;
}

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {batched_gemm({128, 256, 64, 4, 256}), grouped_gemm({128, 256, 64, 4, 256})};
}

bool run_gpu() {
  const int64_t G = 16, M = 1024, N = 1024, K = 1024;
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor a(bf16, {G, M, K}), b(bf16, {G, K, N});
  a.fill_random(1);
  b.fill_random(2);
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b), dc(bf16, {G, M, N});
  dc.fill_bytes(0xff);
  std::vector<Arg> args = {da, db, dc};
  ck.launch(args);
  synchronize();
  bool ok = lesson::check("GPU 16 x 1024^3 (256 samples)", dc.to_host(),
                          reference(a, b, lesson::sample(G * M * N)), kAtol, kRtol);
  lesson::report_flops(time(ck, args, {.runs = 20, .flush_l2 = true}), 2.0 * G * M * N * K);
  return run_grouped(gpu_group_sizes(), N, K, {128, 256, 64, 4, 256}, true) && ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
