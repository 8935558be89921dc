// check_fallback: one run of the fallback, one reference, one element-wise comparison.
#include "perf/FallbackCheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "ops/CudaCheck.h"
#include "ops/reference/AttentionDesc.h"
#include "ops/reference/GpuReference.h"
#include "perf/VendorReference.h"
#include "runtime/Driver.h"
#include "runtime/Launch.h"

namespace tp::perf {

namespace {

/// Accumulates |got - want| <= atol + rtol |want| over elements; NaN or Inf in `got` fails.
struct Comparator {
  FallbackCheck& r;
  double num = 0, den = 0;
  /// `where` is called only for the first failing element (formatting every index is slow).
  template <typename Where>
  void add(double got, double want, const Where& where) {
    ++r.checked;
    double err = std::fabs(got - want);
    bool ok = std::isfinite(got) && err <= r.atol + r.rtol * std::fabs(want);
    if (std::isfinite(got)) {
      r.max_abs_err = std::max(r.max_abs_err, err);
      num += err * err;
      den += want * want;
    } else {
      r.max_abs_err = INFINITY;
    }
    if (ok) return;
    if (r.bad++ == 0) {
      std::ostringstream s;
      s << where() << ": got " << got << ", want " << want;
      r.first_bad = s.str();
    }
  }
  void finish() {
    r.rel_l2_err = std::sqrt(num / std::max(den, 1e-30));
    r.passed = r.bad == 0 && r.checked > 0;
  }
};

/// The fp32 GPU reference of the operator's main output, [count] f32.
std::vector<float> fp32_reference(const ops::Problem& p, const std::vector<cuda::DeviceTensor>& a,
                                  CUstream s) {
  if (p.op == "gemm") {
    int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
    rt::DeviceBuffer c32(size_t(M * N) * sizeof(float));
    ops::gpu_reference_gemm(p.dtype, p.options.at("layout"), M, N, K, a[0].ptr, a[1].ptr, c32.ptr(),
                            s);
    TILEPILOT_CU(rt::driver().cuStreamSynchronize(s));
    return ops::download_f32(c32.ptr(), size_t(M * N));
  }
  ops::AttentionDesc d = ops::attention_desc(p);
  d.lse = false; // O is what is compared; the vendor's LSE argument stays untouched
  rt::DeviceBuffer o32(size_t(d.B * d.H * d.S * d.D) * sizeof(float));
  ops::AttentionPtrs ptrs{a[0].ptr, a[1].ptr, a[2].ptr, o32.ptr()};
  if (d.lens) ptrs.lens = a.back().ptr; // lens is the last parameter
  ops::gpu_reference_attention(d, ptrs, s);
  TILEPILOT_CU(rt::driver().cuStreamSynchronize(s));
  return ops::download_f32(o32.ptr(), o32.bytes() / sizeof(float));
}

/// The unfused reference's O against the fp64 CPU reference on rows of a few (batch, head)
/// pairs: the first, middle and last 16 rows of the first, middle and last pair.
void compare_sampled_rows(const ops::Operator& op, const ops::Problem& p,
                          const std::vector<HostTensor>& host, const OutputView& out,
                          Comparator& cmp) {
  int64_t B = p.at("B"), H = p.at("H"), S = p.at("S"), D = p.at("D");
  const int64_t rows = 16;
  std::vector<std::pair<int64_t, int64_t>> heads = {{0, 0}, {B / 2, H / 2}, {B - 1, H - 1}};
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  for (const auto& bh : heads) {
    const int64_t b = bh.first, h = bh.second;
    std::vector<int64_t> starts = {0, std::max<int64_t>(0, S / 2 - rows / 2),
                                   std::max<int64_t>(0, S - rows)};
    std::sort(starts.begin(), starts.end());
    int64_t done = 0; // rows below `done` were compared already (ranges may overlap)
    for (int64_t r0 : starts) {
      r0 = std::max(r0, done);
      int64_t n = std::min(rows, S - r0);
      if (n <= 0) continue;
      done = r0 + n;
      ops::Box box{3, {b, h, r0, 0}, {1, 1, n, D}};
      std::vector<double> want = op.reference(p, host, box);
      size_t offset = size_t(((b * H + h) * S + r0) * D);
      std::vector<float> got = ops::download_f32(out.ptr + offset * sizeof(float), size_t(n * D));
      for (size_t i = 0; i < got.size(); ++i)
        cmp.add(got[i], want[i], [&] {
          return "O[" + std::to_string(b) + "," + std::to_string(h) + "," +
                 std::to_string(r0 + int64_t(i) / D) + "," + std::to_string(int64_t(i) % D) + "]";
        });
    }
  }
}

} // namespace

FallbackCheck check_fallback(const ops::Operator& op, const ops::Problem& p, uint64_t seed,
                             bool allow_vendor) {
  FallbackCheck r;
  std::tie(r.atol, r.rtol) = ops::default_tolerance(op, p);
  std::vector<HostTensor> host = op.make_args(p, seed);
  ops::DeviceArgs dev = ops::DeviceArgs::upload(host);
  std::unique_ptr<VendorReference> ref = make_reference(p, allow_vendor);
  r.name = ref->name();
  r.note = ref->note();
  rt::Stream stream;
  ref->run(dev.tensors, stream.get());
  stream.synchronize();
  OutputView out = ref->output(dev.tensors);
  Comparator cmp{r};
  if (ref->is_vendor()) {
    r.against = "fp32 GPU reference";
    std::vector<float> want = fp32_reference(p, dev.tensors, stream.get());
    std::vector<float> got = ops::download_as_f32(out.ptr, out.count, out.dtype);
    for (size_t i = 0; i < got.size(); ++i)
      cmp.add(got[i], want[i], [&] { return "flat index " + std::to_string(i); });
  } else {
    r.against = "fp64 CPU reference (sampled rows)";
    compare_sampled_rows(op, p, host, out, cmp);
  }
  cmp.finish();
  return r;
}

} // namespace tp::perf
