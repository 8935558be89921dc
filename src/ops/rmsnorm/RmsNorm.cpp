// RMSNorm's kernel, parsing, inputs and fp64 reference (see RmsNorm.h). One block normalises
// `rows` whole rows held in an f32 fragment: x (and r) are read once, s and y written once.
#include "ops/rmsnorm/RmsNorm.h"

#include <algorithm>
#include <cmath>

#include "ops/ParseHelpers.h"
#include "tilepilot/error.h"

namespace tp::ops::rmsnorm {

Problem parse(const std::map<std::string, std::string>& kv, DType dtype) {
  reject_unknown(kv, {"T", "H", "residual"}, "rmsnorm");
  const std::string ex = "T=4096,H=4096,residual=1";
  Problem p;
  p.op = "rmsnorm";
  p.dtype = dtype;
  p.shape["T"] = require_positive(kv, "T", "rmsnorm", ex);
  p.shape["H"] = require_positive(kv, "H", "rmsnorm", ex);
  p.shape["residual"] = optional_int(kv, "residual", 0, "rmsnorm", true);
  if (p.shape["residual"] > 1)
    user_error() << "rmsnorm: residual=" << p.shape["residual"]
                 << " is not 0 or 1; residual=1 adds r to x first and returns both x + r and y";
  if (dtype != DType::bf16 && dtype != DType::f16 && dtype != DType::f32)
    user_error() << "rmsnorm: dtype " << dtype_name(dtype)
                 << " is not supported; use bf16, f16 or f32";
  return p;
}

std::vector<int> outputs(const Problem& p) {
  if (p.at("residual")) return {3, 4};
  return {2};
}

Config default_config(const Problem& p, const std::string& arch) {
  const int64_t H = p.at("H");
  (void)arch; // the interpreter runs any valid config; the GPU rule serves it too
  // One row per block keeps T = 1 (decode) to one block and large T to many. With rows enough
  // for several blocks on every SM, about 32 elements a thread: each issues four 16-byte loads
  // of its row at once, and smaller blocks fill the SMs more evenly. On an H100 (2026-12-07,
  // call s1) T = H = 8192 ran 0.0946 ms with 256 threads (96 % of the copy) against 0.1169 ms
  // with the 1024 of eight a thread; T = H = 4096 with a residual ran 0.0503 ms with 128 and
  // 0.0501 with 512. Few rows keep eight a thread, so that the one or few blocks spread
  // the row over more threads (T = 1, H = 4096: 4.61 us with 512, 4.70 with 128).
  //
  // The count is a power of two: the compiler spreads a one-row block's row over a power of two
  // of threads, so a count such as 640 (H = 5120 at eight a thread) left four of its five
  // thread rows without elements. Where the count does not divide the row's 16-byte runs
  // (H = 5000: 625 runs; 7168 over 256 threads: 3.5 runs each), the last run block is ragged
  // and its registers past H are guarded (passes/Layout.h), instead of the row going to
  // shared memory as it did before ragged layouts.
  //
  // With many rows, a smaller power of two that divides the runs wins over a ragged count
  // while the row still fits the registers (64 elements a thread, counting the residual's
  // row). On an H100 (2026-12-07, call a1, T = 4096): H = 5120 ran 0.0340 ms with 128 threads
  // against 0.0367 with 256 (ragged), H = 14336 0.0843 with 256 against 0.1135 with 512; the
  // residual's 7168 ran 0.0902 ragged over 256 against 0.1512 over 128 (112 elements a
  // thread, which put the rows in shared memory), and H = 5000, which nothing divides, 0.0367
  // ragged over 256 against 0.2384 with its old 640 threads.
  const bool many = p.at("T") >= kManyRows;
  const int64_t per_thread = many ? 32 : 8;
  int64_t threads = 128;
  while (threads < 1024 && threads < H / per_thread)
    threads *= 2;
  const int64_t vec = 16 / dtype_bytes(p.dtype), rows_held = p.at("residual") ? 2 : 1;
  if (many && H % vec == 0)
    for (int64_t t = threads; t >= 128 && H / t * rows_held <= 64; t /= 2)
      if ((H / vec) % t == 0) {
        threads = t;
        break;
      }
  return {{"rows", 1}, {"threads", threads}};
}

void validate(const Problem& p, const Config& c) {
  // Each knob's domain is its Knob's (check_config); this is the rule between them.
  const int64_t rows = c.at("rows"), threads = c.at("threads");
  // The rows are held in registers: beyond this they spill, and a smaller block wins anyway.
  const int64_t per_thread = (rows * p.at("H") + threads - 1) / threads;
  if (per_thread > kMaxPerThread)
    user_error() << "rmsnorm: rows=" << rows << " x H=" << p.at("H") << " over threads=" << threads
                 << " is " << per_thread << " elements per thread, more than " << kMaxPerThread
                 << "; use fewer rows or more threads";
}

Kernel build(const Problem& p, const Config& c) {
  validate(p, c);
  const int64_t H = p.at("H"), rows = c.at("rows");
  const bool residual = p.at("residual") != 0;
  const DType dt = p.dtype;
  Dim T("T");
  Tensor X("x", {T, H}, dt), R("r", {T, H}, dt), W("w", {H}, dt);
  Tensor S("s", {T, H}, dt), Y("y", {T, H}, dt);
  Params params = residual ? Params{X, R, W, S, Y} : Params{X, W, Y};
  std::string name = "rmsnorm_h" + std::to_string(H) + (residual ? "_residual" : "");
  return kernel(
      name, params, grid(ceildiv(T, rows)), threads(static_cast<int>(c.at("threads"))), [&](Var b) {
        Expr r0 = b * rows;
        Tile x = alloc_fragment({rows, H}, f32), sq = alloc_fragment({rows, H}, f32);
        Tile w = alloc_fragment({H}, f32), inv = alloc_fragment({rows}, f32);
        copy(X.tile(r0, 0), x);
        if (residual) {
          Tile r = alloc_fragment({rows, H}, f32);
          copy(R.tile(r0, 0), r);
          // s is what the caller gets back, so y must normalise s as rounded.
          parallel({rows, H}, [&](Var i, Var j) { x(i, j) = cast(dt, x(i, j) + r(i, j)); });
          copy(x, S.tile(r0, 0));
        }
        copy(W.tile(0), w);
        parallel({rows, H}, [&](Var i, Var j) { sq(i, j) = x(i, j) * x(i, j); });
        reduce_sum(sq, inv, 1);
        // Rows past T read zeros: rsqrt(eps) stays finite, and they are not written.
        parallel({rows},
                 [&](Var i) { inv(i) = rsqrt(inv(i) * (1.0 / static_cast<double>(H)) + kEps); });
        parallel({rows, H}, [&](Var i, Var j) { x(i, j) = x(i, j) * inv(i) * w(j); });
        copy(x, Y.tile(r0, 0));
      });
}

std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) {
  const int64_t T = p.at("T"), H = p.at("H");
  const bool residual = p.at("residual") != 0;
  std::vector<HostTensor> a;
  a.emplace_back(p.dtype, std::vector<int64_t>{T, H});
  a.back().fill_random(seed * 5 + 1);
  if (residual) {
    a.emplace_back(p.dtype, std::vector<int64_t>{T, H});
    a.back().fill_random(seed * 5 + 2);
  }
  a.emplace_back(p.dtype, std::vector<int64_t>{H});
  a.back().fill_random(seed * 5 + 3, 0.5, 1.5);
  for (int k = 0; k < (residual ? 2 : 1); ++k) {
    a.emplace_back(p.dtype, std::vector<int64_t>{T, H});
    a.back().poison();
  }
  return a;
}

std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& a, int tensor,
                              int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  const int64_t H = p.at("H");
  const bool residual = p.at("residual") != 0;
  const HostTensor& x = a[0];
  const HostTensor& w = a[residual ? 2 : 1];
  const bool want_s = residual && tensor == 3;
  internal_assert(tensor == outputs(p).back() || want_s)
      << "rmsnorm reference asked for parameter " << tensor << ", which is not an output";
  std::vector<double> out(nr * nc), s(H);
  for (int64_t i = 0; i < nr; ++i) {
    const int64_t row = (r0 + i) * H;
    for (int64_t j = 0; j < H; ++j)
      s[j] = residual ? x.get(row + j) + a[1].get(row + j) : x.get(row + j);
    if (want_s) {
      for (int64_t j = 0; j < nc; ++j)
        out[i * nc + j] = s[c0 + j];
      continue;
    }
    // y normalises s as the kernel returns it: rounded to the dtype.
    double ss = 0;
    for (int64_t j = 0; j < H; ++j) {
      if (residual) s[j] = round_to(p.dtype, s[j]);
      ss += s[j] * s[j];
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(H) + kEps);
    for (int64_t j = 0; j < nc; ++j)
      out[i * nc + j] = s[c0 + j] * inv * w.get(c0 + j);
  }
  return out;
}

} // namespace tp::ops::rmsnorm
