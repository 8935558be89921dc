// check_fallback: one run of the fallback, one reference, one element-wise comparison.
#include "perf/FallbackCheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "ops/CudaCheck.h"
#include "ops/reference/GpuReference.h"
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
    if (std::isinf(want) && got == want) return; // -inf log-sum-exp of a row with no key
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

/// The outputs of `p` under the operator's fp32 GPU reference, one f32 vector per output;
/// empty when the operator has none.
std::vector<std::vector<float>> fp32_reference(const ops::Operator& op, const ops::Problem& p,
                                               const std::vector<cuda::DeviceTensor>& a,
                                               CUstream s) {
  std::vector<rt::DeviceBuffer> bufs;
  std::vector<DeviceTensor> outs;
  for (int o : op.outputs(p)) {
    const DeviceTensor& t = a.at(o);
    bufs.emplace_back(size_t(t.numel()) * sizeof(float));
    outs.emplace_back(static_cast<uint64_t>(bufs.back().ptr()), DType::f32, t.shape);
  }
  if (!op.gpu_reference(p, a, outs, s)) return {};
  TILEPILOT_CU(rt::driver().cuStreamSynchronize(s));
  std::vector<std::vector<float>> out;
  for (const rt::DeviceBuffer& b : bufs)
    out.push_back(ops::download_f32(b.ptr(), b.bytes() / sizeof(float)));
  return out;
}

/// The outputs against the fp64 CPU reference on the boxes of a few blocks of the
/// interpreter's default config: the first, the middle and the last.
void compare_sampled_blocks(const ops::Operator& op, const ops::Problem& p,
                            const std::vector<HostTensor>& host, const std::vector<HostTensor>& got,
                            Comparator& cmp) {
  const ops::Config c = op.default_config(p, "cpu");
  const std::array<int64_t, 3> g = op.grid(p, c);
  const int64_t n = g[0] * g[1] * g[2];
  std::vector<int64_t> picks = {0, n / 2, n - 1};
  picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
  for (int64_t i : picks) {
    const std::array<int64_t, 3> blk{i % g[0], (i / g[0]) % g[1], i / (g[0] * g[1])};
    for (const ops::Box& box : op.block_outputs(p, c, blk)) {
      std::vector<double> want = op.reference(p, host, box);
      const HostTensor& out = got.at(box.tensor);
      const std::vector<int64_t>& shape = out.shape();
      std::vector<int64_t> idx(shape.size(), 0);
      for (size_t e = 0; e < want.size(); ++e) {
        int64_t flat = 0;
        for (size_t d = 0; d < shape.size(); ++d)
          flat = flat * shape[d] + box.min[d] + idx[d];
        cmp.add(out.get(flat), want[e], [&] {
          std::string w = "output " + std::to_string(box.tensor) + "[";
          for (size_t d = 0; d < shape.size(); ++d)
            w += (d ? "," : "") + std::to_string(box.min[d] + idx[d]);
          return w + "]";
        });
        for (size_t d = shape.size(); d-- > 0;) {
          if (++idx[d] < box.extent[d]) break;
          idx[d] = 0;
        }
      }
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
  ops::FrameworkOptions fo;
  fo.allow_vendor = allow_vendor;
  std::unique_ptr<ops::Framework> fw = op.framework(p, fo);
  r.name = fw->name();
  r.note = fw->note();
  rt::Stream stream;
  fw->run(dev.tensors, stream.get());
  stream.synchronize();
  std::vector<HostTensor> got = host;
  const std::vector<int> outs = op.outputs(p);
  dev.download(got, outs);
  Comparator cmp{r};
  // A stand-in framework may be the GPU reference itself: comparing it with itself would prove
  // nothing, so stand-ins are held to the fp64 reference.
  std::vector<std::vector<float>> want;
  if (fw->is_vendor()) want = fp32_reference(op, p, dev.tensors, stream.get());
  if (!want.empty()) {
    r.against = "fp32 GPU reference";
    for (size_t o = 0; o < outs.size(); ++o) {
      const HostTensor& t = got[outs[o]];
      for (size_t i = 0; i < want[o].size(); ++i)
        cmp.add(t.get(static_cast<int64_t>(i)), want[o][i], [&] {
          return "output " + std::to_string(outs[o]) + " flat index " + std::to_string(i);
        });
    }
  } else {
    r.against = "fp64 CPU reference (sampled blocks)";
    compare_sampled_blocks(op, p, host, got, cmp);
  }
  cmp.finish();
  return r;
}

} // namespace tp::perf
