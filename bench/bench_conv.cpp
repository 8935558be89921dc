// bench_conv: lesson 12's implicit-GEMM conv (examples/12_conv2d.cpp, the conv2d_box kernel) at
// several tile configs, side by side in one process with cuDNN's forward convolution on the same
// data: 128 x 64 x 64 x 128 NHWC -> 128 filters, 3 x 3, stride 1, pad 1, bf16 in and out, f32
// accumulate. Both sides run on one stream of one harness, L2 flushed before each timed run,
// median of 20 after warm-up. cuDNN gets the filter transposed to KRSC [F, KH, KW, C] on the host;
// ours reads it as the lesson does, [KH KW C, F]. Every side is checked on 256 sampled outputs
// against an fp64 host reference (the lesson's check), and ours against cuDNN on the same
// samples. A config the compiler rejects is skipped with a line saying why.
// Usage: bench_conv             the comparison (exit 2 without a usable GPU)
//        bench_conv --compile   no GPU: which configs lower, and ptxas resources for sm_90a
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <tilepilot/tilepilot.h>

#include "BenchHarness.h"
#include "ops/vendor/CudnnConv.h"

using namespace tp;

namespace {

struct Conv {
  int64_t H, W, C, F, KH, KW, stride, pad;
  int64_t OH() const { return (H + 2 * pad - KH) / stride + 1; }
  int64_t OW() const { return (W + 2 * pad - KW) / stride + 1; }
  int64_t K() const { return KH * KW * C; }
};

struct Config {
  int64_t bm, bn, bk;
  int stages, threads;
  bool persistent;
  bool cluster = false; // pairs of blocks along y, the filter tile multicast to both
  std::string str() const {
    return std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) + " s" +
           std::to_string(stages) + " t" + std::to_string(threads) +
           (persistent ? " persistent" : "") + (cluster ? " cluster2" : "");
  }
};

// Lesson 12's --gpu shape.
const Conv kConv{64, 64, 128, 128, 3, 3, 1, 1};
const int64_t kBatch = 128;

const std::vector<Config> kConfigs = {
    {128, 128, 64, 4, 256, false}, // lesson 12's
    {128, 128, 64, 5, 256, false},
    {128, 128, 64, 4, 256, true},
    {128, 128, 64, 4, 128, false},
    {128, 128, 64, 4, 128, true},
    // Two consumer warpgroups of 128 rows each (256 threads; 384 would be three warpgroups,
    // which no 256-row wgmma splits into).
    {256, 128, 64, 4, 256, false},
    {256, 128, 64, 3, 256, false},
    {256, 128, 64, 4, 256, true},
    {128, 128, 64, 6, 256, false},
    {256, 128, 64, 4, 256, false, true},
    {256, 128, 32, 8, 256, true},
    {128, 128, 64, 4, 256, false, true},
};

// Can conv2d_box run this shape and config (examples/12_conv2d.cpp says why)?
bool box_loads(const Conv& v, const Config& c) {
  const int64_t OW = v.OW();
  bool whole_rows = c.bm % OW == 0 && v.OH() % (c.bm / OW) == 0;
  return v.stride == 1 && v.C % c.bk == 0 && (whole_rows || OW % c.bm == 0);
}

// examples/12_conv2d.cpp's conv2d_box, with bench_batched_gemm's persistent annotation.
Kernel conv2d_box(const Conv& v, const Config& c) {
  Dim Nb("batch"), P("P");
  const int64_t OH = v.OH(), OW = v.OW(), K = v.K();
  const int64_t cols = std::min(c.bm, OW), rows = c.bm / cols; // the tile's output pixels
  Tensor X("X", {Nb, v.H, v.W, v.C}, bf16), Wt("Wt", {K, v.F}, bf16), Y("Y", {P, v.F}, bf16);
  auto body = [&](Var bx, Var by) {
    if (c.persistent) annotate("persistent", "1");
    if (c.cluster) annotate("cluster", "2");
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

// The lesson's sample: first, last, and the rest spread over [0, n) by a multiplicative hash.
std::vector<int64_t> sample(int64_t n, int64_t count = 256) {
  std::vector<int64_t> at = {0, n - 1};
  for (int64_t s = 0; s < count - 2; ++s)
    at.push_back((s * 2654435761LL) % n);
  return at;
}

// Y[p, f] in fp64 at each flat index of Y, from the definition; w is the lesson's [KH KW C, F].
std::vector<double> reference(const Conv& v, const HostTensor& x, const HostTensor& w,
                              const std::vector<int64_t>& at) {
  std::vector<double> want;
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
    want.push_back(s);
  }
  return want;
}

// The lesson's tolerance: Y rounds once to bf16 (2^-8 relative); f32 accumulation of K products
// adds ~K 2^-24. Two results that each meet it may differ by twice as much.
constexpr double kAtol = 2e-3, kRtol = 1.0 / 128;

/// Y's values at `at`; NaN where a kernel left the poison.
std::vector<double> values_at(const DeviceArray& y, const std::vector<int64_t>& at) {
  HostTensor h = y.to_host();
  std::vector<double> out;
  for (int64_t i : at)
    out.push_back(h.get(i));
  return out;
}

/// "max err 1.2e-03 vs fp64: pass" (or FAIL with the count); `scale` widens the tolerance.
std::string compare(const std::vector<double>& got, const std::vector<double>& want, double scale,
                    const char* against, bool* ok) {
  double max_err = 0;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(got[i] - want[i]);
    if (!(err <= scale * (kAtol + kRtol * std::fabs(want[i])))) ++bad;
    if (!(err <= max_err)) max_err = err; // NaN wins
  }
  *ok = *ok && bad == 0;
  return fmt::format("max err {:.2e} vs {}: {}", max_err, against,
                     bad ? fmt::format("FAIL ({} of {})", bad, got.size()) : "pass");
}

/// The filter as cuDNN reads it, KRSC [F, KH, KW, C]: the lesson's [KH KW C, F] transposed.
/// Raw bf16 bits are moved, so both sides multiply exactly the same values.
HostTensor to_krsc(const Conv& v, const HostTensor& w) {
  HostTensor t(bf16, {v.F, v.KH, v.KW, v.C});
  auto* dst = static_cast<uint16_t*>(t.data());
  auto* src = static_cast<const uint16_t*>(w.data());
  for (int64_t k = 0; k < v.K(); ++k)
    for (int64_t f = 0; f < v.F; ++f)
      dst[f * v.K() + k] = src[k * v.F + f];
  return t;
}

/// The data both sides read, and the fp64 answer at the sampled outputs.
struct Problem {
  const Conv& v;
  ops::ConvFwdShape shape;
  DeviceArray x, w, w_krsc;
  std::vector<int64_t> at;
  std::vector<double> want;
};

/// cuDNN's line; its milliseconds and sampled outputs when it ran, so ours can be compared.
struct CudnnSide {
  std::optional<double> ms;
  std::vector<double> at;
};

CudnnSide run_cudnn(const Problem& pb, bench::Harness& h, bool* ok) {
  CudnnSide side;
  std::string why;
  if (!ops::cudnn_conv_available(&why)) {
    std::printf("%-30s not available: %s\n", "cuDNN", why.c_str());
    return side;
  }
  try {
    ops::CudnnConvFwd dnn(pb.shape);
    DeviceArray dy(bf16, {pb.shape.N, pb.shape.OH(), pb.shape.OW(), pb.shape.F});
    dy.fill_bytes(0xff);
    auto run = [&](CUstream s) {
      dnn.run(pb.x.tensor().ptr, pb.w_krsc.tensor().ptr, dy.tensor().ptr, s);
    };
    run(h.stream());
    synchronize();
    side.at = values_at(dy, pb.at);
    std::string check = compare(side.at, pb.want, 1, "fp64", ok);
    bench::Timing t = h.time(run);
    side.ms = t.median_ms;
    std::printf("%-30s %8.4f ms  %6.1f TFLOP/s  %s; %s\n",
                ("cuDNN " + dnn.library().version_text()).c_str(), t.median_ms,
                bench::tflops(pb.shape.flops(), t.median_ms), dnn.plan_summary().c_str(),
                check.c_str());
  } catch (const std::exception& e) {
    std::printf("%-30s %s\n", "cuDNN", e.what());
  }
  return side;
}

void run_ours(const Problem& pb, const Config& c, const CudnnSide& dnn, bench::Harness& h,
              bool* ok) {
  const Conv& v = pb.v;
  if (!box_loads(v, c)) {
    std::printf("%-30s skipped: the shape does not fit the box kernel\n", c.str().c_str());
    return;
  }
  CompiledKernel ck;
  DeviceArray dy(bf16, {pb.shape.N * v.OH() * v.OW(), v.F});
  std::vector<Arg> args = {pb.x, pb.w, dy};
  try {
    ck = compile(conv2d_box(v, c));
    ck.prepare(args); // lowering and NVRTC, outside the timed runs
  } catch (const std::exception& e) {
    std::printf("%-30s skipped, the compiler rejects it: %s\n", c.str().c_str(), e.what());
    return;
  }
  try {
    dy.fill_bytes(0xff);
    ck.launch(args, h.stream());
    synchronize();
    std::vector<double> got = values_at(dy, pb.at);
    std::string check = compare(got, pb.want, 1, "fp64", ok);
    if (!dnn.at.empty()) check += "; " + compare(got, dnn.at, 2, "cuDNN", ok);
    bench::Timing t = h.time([&](CUstream s) { ck.launch(args, s); });
    std::string ratio = dnn.ms ? fmt::format("{:.3f}x", *dnn.ms / t.median_ms) : "-";
    std::printf("%-30s %8.4f ms  %6.1f TFLOP/s  %6s vs cuDNN  %3d regs  %s\n", c.str().c_str(),
                t.median_ms, bench::tflops(pb.shape.flops(), t.median_ms), ratio.c_str(),
                ck.resources().registers, check.c_str());
  } catch (const std::exception& e) {
    *ok = false;
    std::printf("%-30s error: %s\n", c.str().c_str(), e.what());
  }
}

/// --compile: whether each config lowers and what ptxas reports for sm_90a; needs no GPU.
int compile_only() {
  for (const Config& c : kConfigs) {
    if (!box_loads(kConv, c)) {
      std::printf("%-30s skipped: the shape does not fit the box kernel\n", c.str().c_str());
      continue;
    }
    try {
      Resources r = compile(conv2d_box(kConv, c), {.arch = "sm_90a"}).resources();
      std::printf("%-30s sm_90a: %3d regs, %d spill bytes, %lld B shared%s\n", c.str().c_str(),
                  r.registers, r.spill_bytes, (long long)r.smem_dynamic + r.smem_static,
                  r.wgmma_serialized ? ", wgmma serialized" : "");
    } catch (const std::exception& e) {
      std::printf("%-30s skipped, the compiler rejects it: %s\n", c.str().c_str(), e.what());
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  std::string mode = argc == 2 ? argv[1] : "";
  if (argc > 2 || (argc == 2 && mode != "--compile")) {
    std::fprintf(stderr, "usage: %s [--compile]\n", argv[0]);
    return 2;
  }
  if (mode == "--compile") return compile_only();
  std::string why;
  if (!gpu_available(&why)) {
    std::fprintf(stderr, "%s: needs a CUDA GPU: %s\n", argv[0], why.c_str());
    return 2;
  }
  const Conv& v = kConv;
  ops::ConvFwdShape shape;
  shape.N = kBatch, shape.H = v.H, shape.W = v.W, shape.C = v.C, shape.filter_C = v.C;
  shape.F = v.F, shape.KH = v.KH, shape.KW = v.KW;
  shape.stride_h = shape.stride_w = v.stride;
  shape.pad_h = shape.pad_w = v.pad;
  std::printf("bench_conv: %s, %.1f GFLOP; ratio = cuDNN ms / ours ms (above 1: ours faster)\n",
              shape.str().c_str(), shape.flops() / 1e9);

  HostTensor x(bf16, {kBatch, v.H, v.W, v.C}), w(bf16, {v.K(), v.F});
  x.fill_random(1);
  w.fill_random(2);
  const std::vector<int64_t> at = sample(kBatch * v.OH() * v.OW() * v.F);
  Problem pb{v,
             shape,
             DeviceArray::from(x),
             DeviceArray::from(w),
             DeviceArray::from(to_krsc(v, w)),
             at,
             reference(v, x, w, at)};

  bench::TimingOptions opt;
  opt.runs = 20;
  opt.flush_l2 = true;
  // The harness tp::time(ck, args, ...) wraps, held once so that both sides share its stream
  // (tp::time makes a new one per call).
  bench::Harness harness(opt);
  bool ok = true;
  // cuDNN first, so that every config's line can carry the ratio.
  CudnnSide dnn = run_cudnn(pb, harness, &ok);
  std::fflush(stdout);
  for (const Config& c : kConfigs) {
    run_ours(pb, c, dnn, harness, &ok);
    std::fflush(stdout); // a run stopped at a time limit shows the config it was on
  }
  return ok ? 0 : 1;
}
