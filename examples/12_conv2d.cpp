// Lesson 12: 2-D convolution as an implicit GEMM. X is NHWC [batch, H, W, C], the filter is
// [KH * KW * C, F] (row (kh KW + kw) C + c), Y is [P, F] with P = batch OH OW (NHWC flattened).
// Y = im2col(X) Wt, where im2col is never stored: each K step fills the bm x bk A tile with its
// patch of im2col(X), zero where the window hangs over the padding, and the rest is lesson 7's
// GEMM. Sizes other than the batch are compile-time constants. Two kernels, picked by the shape:
//   conv2d_box     stride 1, C a multiple of bk, and a tile of bm output pixels that is whole
//                  output rows of one image (bm a multiple of OW, OH a multiple of bm / OW) or
//                  part of one row (OW a multiple of bm). A K step is then one (kh, kw) and a
//                  chunk of bk channels from c0, and its A tile is one box of X: the
//                  [1, rows, cols, bk] box at (n, oh0 + kh - pad, ow0 + kw - pad, c0), with
//                  cols = min(bm, OW) and rows = bm / cols. Copying it into the [bm, bk] tile
//                  flattens its outer dimensions row-major (the copy rule), and the padding is
//                  the box hanging over the edges of X, read as zeros. On sm_90a the box is one
//                  TMA load, so the kernel gets lesson 7's warp-specialized TMA pipeline.
//   conv2d_gather  any stride and padding: a `parallel` loop gathers the patch element by
//                  element (select for the padding). It is not a copy, so only the filter's
//                  tile is pipelined: on the H200 this kernel ran at 39 TFLOP/s on the --gpu
//                  shape (docs/perf-log.md).
// Teaches: a box copy that regroups dimensions; a gathered (computed-index) tile load;
// decomposing flat indices.
// Run: build/example_12_conv2d         CPU interpreter: box kernel on 2 x 8 x 8 x 32 -> 24
//                                      filters, 3 x 3, stride 1, pad 1; gather kernel on
//                                      2 x 9 x 11 x 8 -> 13, 3 x 3, stride 2, pad 1
//      build/example_12_conv2d --gpu   H200, box kernel: 128 x 64 x 64 x 128 -> 128, 3 x 3,
//                                      stride 1, pad 1
//      build/example_12_conv2d --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

struct Conv {
  int64_t H, W, C, F, KH, KW, stride, pad;
  int64_t OH() const { return (H + 2 * pad - KH) / stride + 1; }
  int64_t OW() const { return (W + 2 * pad - KW) / stride + 1; }
  int64_t K() const { return KH * KW * C; }
};

struct GemmConfig {
  int64_t bm, bn, bk;
  int stages, threads;
  bool persistent = false; // about one block per SM, taking tiles in turn (docs/schedules.md)
};

// Can conv2d_box run this shape and config (see the top of the file)?
bool box_loads(const Conv& v, const GemmConfig& c) {
  const int64_t OW = v.OW();
  bool whole_rows = c.bm % OW == 0 && v.OH() % (c.bm / OW) == 0;
  return v.stride == 1 && v.C % c.bk == 0 && (whole_rows || OW % c.bm == 0);
}

Kernel conv2d_box(const Conv& v, const GemmConfig& c) {
  Dim Nb("batch"), P("P");
  const int64_t OH = v.OH(), OW = v.OW(), K = v.K();
  const int64_t cols = std::min(c.bm, OW), rows = c.bm / cols; // the tile's output pixels
  Tensor X("X", {Nb, v.H, v.W, v.C}, bf16), Wt("Wt", {K, v.F}, bf16), Y("Y", {P, v.F}, bf16);
  auto body = [&](Var bx, Var by) {
    if (c.persistent) annotate("persistent", "1");
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32);
    clear(acc);
    // The tile's first output pixel: image n, row oh0, column ow0 (0 for whole rows).
    Expr p0 = by * c.bm, n = p0 / (OH * OW), oh0 = p0 / OW % OH, ow0 = p0 % OW;
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      Expr kk = k * c.bk, kh = kk / (v.KW * v.C), kw = kk / v.C % v.KW, c0 = kk % v.C;
      // Starts below 0 or boxes past the edge read zeros: the padding.
      copy(X.tile({n, oh0 + kh - v.pad, ow0 + kw - v.pad, c0}, {1, rows, cols, c.bk}), As);
      copy(Wt.tile(k * c.bk, bx * c.bn), Bs);
      gemm(As, Bs, acc);
    });
    copy(acc, Y.tile(by * c.bm, bx * c.bn));
  };
  return kernel("conv2d_box", {X, Wt, Y}, grid(ceildiv(v.F, c.bn), ceildiv(P, c.bm)),
                threads(c.threads), body);
}

Kernel conv2d_gather(const Conv& v, const GemmConfig& c) {
  Dim Nb("batch"), P("P");
  const int64_t OH = v.OH(), OW = v.OW(), K = v.K();
  Tensor X("X", {Nb, v.H, v.W, v.C}, bf16), Wt("Wt", {K, v.F}, bf16), Y("Y", {P, v.F}, bf16);
  auto body = [&](Var bx, Var by) {
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      parallel({c.bm, c.bk}, [&](Var i, Var j) {
        Expr p = by * c.bm + i, kk = k * c.bk + j; // output pixel, im2col column
        Expr n = p / (OH * OW), oh = p / OW % OH, ow = p % OW;
        Expr kh = kk / (v.KW * v.C), kw = kk / v.C % v.KW, ch = kk % v.C;
        Expr ih = oh * v.stride + kh - v.pad, iw = ow * v.stride + kw - v.pad;
        Expr ok = p < P && kk < K && ih >= 0 && ih < v.H && iw >= 0 && iw < v.W;
        // later: with a lazy select the load needs no clamping: only `ok` elements are read.
        auto clamp = [](const Expr& x, int64_t hi) { return max(min(x, hi - 1), 0); };
        Expr x = X(min(n, Nb - 1), clamp(ih, v.H), clamp(iw, v.W), ch);
        As(i, j) = select(ok, x, cast(bf16, 0.0));
      });
      copy(Wt.tile(k * c.bk, bx * c.bn), Bs);
      gemm(As, Bs, acc);
    });
    copy(acc, Y.tile(by * c.bm, bx * c.bn));
  };
  return kernel("conv2d_gather", {X, Wt, Y}, grid(ceildiv(v.F, c.bn), ceildiv(P, c.bm)),
                threads(c.threads), body);
}

Kernel conv2d(const Conv& v, const GemmConfig& c) {
  return box_loads(v, c) ? conv2d_box(v, c) : conv2d_gather(v, c);
}

// Y[p, f] in fp64 for the given flat indices of Y, straight from the definition.
std::vector<std::pair<int64_t, double>>
reference(const Conv& v, const HostTensor& x, const HostTensor& w, const std::vector<int64_t>& at) {
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t i : at) {
    int64_t p = i / v.F, f = i % v.F, n = p / (v.OH() * v.OW()), oh = p / v.OW() % v.OH(),
            ow = p % v.OW();
    double s = 0;
    for (int64_t kh = 0; kh < v.KH; ++kh)
      for (int64_t kw = 0; kw < v.KW; ++kw) {
        int64_t ih = oh * v.stride + kh - v.pad, iw = ow * v.stride + kw - v.pad;
        if (ih < 0 || ih >= v.H || iw < 0 || iw >= v.W) continue;
        for (int64_t c = 0; c < v.C; ++c)
          s += x.get(((n * v.H + ih) * v.W + iw) * v.C + c) *
               w.get(((kh * v.KW + kw) * v.C + c) * v.F + f);
      }
    want.emplace_back(i, s);
  }
  return want;
}

// Y rounds once to bf16 (2^-8 relative); f32 accumulation of K products adds ~K 2^-24.
constexpr double kAtol = 2e-3, kRtol = 1.0 / 128;

// Runs `conv2d(v, c)` on the interpreter and checks every element of Y.
bool run_cpu_case(const char* what, const Conv& v, const GemmConfig& c, bool want_box) {
  if (box_loads(v, c) != want_box) {
    std::printf("%s: expected the %s kernel\n", what, want_box ? "box" : "gather");
    return false;
  }
  const int64_t Nb = 2, P = Nb * v.OH() * v.OW();
  HostTensor x(bf16, {Nb, v.H, v.W, v.C}), w(bf16, {v.K(), v.F}), y(bf16, {P, v.F});
  x.fill_random(1);
  w.fill_random(2);
  y.poison();
  interpret(conv2d(v, c), {x, w, y});
  return lesson::check(what, y, reference(v, x, w, lesson::all(P * v.F)), kAtol, kRtol);
}

bool run_cpu() {
  // Box: two output rows of 8 per tile, 24 filters in tiles of 16 (a ragged last tile).
  bool box = run_cpu_case("CPU box, 2 x 8 x 8 x 32, 3 x 3 / 1", {8, 8, 32, 24, 3, 3, 1, 1},
                          {16, 16, 16, 2, 128}, true);
  bool gather = run_cpu_case("CPU gather, 2 x 9 x 11 x 8, 3 x 3 / 2", {9, 11, 8, 13, 3, 3, 2, 1},
                             {32, 16, 32, 2, 128}, false);
  return box && gather;
}

const Conv kGpuConv{64, 64, 128, 128, 3, 3, 1, 1};
// N is the 128 filters; 256 output pixels (four output rows of 64) a tile, 128 rows for each of
// two consumer warpgroups, and persistent blocks: the fastest of bench/bench_conv's configs
// (0.77x cuDNN on an H100 against 0.70x for 128-pixel tiles, docs/perf-log.md).
const GemmConfig kGpuConfig{256, 128, 64, 4, 256, true};

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {conv2d(kGpuConv, kGpuConfig)};
}

bool run_gpu() {
  const Conv& v = kGpuConv;
  const int64_t Nb = 128, P = Nb * v.OH() * v.OW();
  if (!box_loads(v, kGpuConfig)) {
    std::printf("the GPU shape and config do not fit the box kernel\n");
    return false;
  }
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor x(bf16, {Nb, v.H, v.W, v.C}), w(bf16, {v.K(), v.F});
  x.fill_random(1);
  w.fill_random(2);
  DeviceArray dx = DeviceArray::from(x), dw = DeviceArray::from(w), dy(bf16, {P, v.F});
  dy.fill_bytes(0xff);
  std::vector<Arg> args = {dx, dw, dy};
  ck.launch(args);
  synchronize();
  bool ok = lesson::check("GPU 128 x 64 x 64 x 128 (256 samples)", dy.to_host(),
                          reference(v, x, w, lesson::sample(P * v.F)), kAtol, kRtol);
  lesson::report_flops(time(ck, args, {.runs = 20, .flush_l2 = true}), 2.0 * P * v.F * v.K());
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
