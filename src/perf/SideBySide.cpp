// time_side_by_side: check, upload, compile (cold and warm), then time ours and the reference
// with one harness.
#include "perf/SideBySide.h"

#include "ops/CudaCheck.h"
#include "perf/OursKernel.h"
#include "runtime/Driver.h"
#include "tilepilot/device.h"
#include "tilepilot/device_error.h"
#include "tilepilot/runtime.h"

namespace tp::perf {

namespace {

/// A UserError's message without its "error: " prefix, for embedding in a note.
std::string reason(const std::exception& e) {
  std::string s = e.what();
  size_t at = s.find("error: ");
  return at == std::string::npos ? s : s.substr(at + 7);
}

} // namespace

std::optional<double> SideBySide::speedup() const {
  if (!ours || !ref || ours->median_ms <= 0) return std::nullopt;
  return ref->median_ms / ours->median_ms;
}

SideBySide time_side_by_side(const ops::Operator& op, const ops::Problem& p, const ops::Config& c,
                             const SideBySideOptions& o) {
  SideBySide r;
  r.arch = ops::device_arch(); // user error without a GPU, before any work
  std::string why;
  if (auto info = rt::device_info(rt::selected_device_ordinal(), &why)) r.device = info->name;
  ops::check_config(op, p, c, r.arch);
  r.config = c;
  r.flops = op.flops(p);
  r.bytes = op.min_bytes(p);
  if (o.check_first) {
    ops::CheckOptions co;
    co.config = c;
    co.seed = o.seed;
    r.check = ops::check_cuda(op, p, co);
    if (!r.check->passed) return r;
  }
  ops::DeviceArgs dev = ops::DeviceArgs::upload(op.make_args(p, o.seed));
  if (o.compile_timing) r.compile = measure_compile(op, p, c, r.arch, dev.tensors);
  OursKernel ours =
      r.compile ? OursKernel(r.compile->program, dev.tensors) : OursKernel(op, p, c, dev.tensors);
  std::unique_ptr<ops::Framework> ref;
  try {
    ref = op.framework(p, {});
    r.ref_name = ref->name();
    r.ref_note = ref->note();
  } catch (const UserError& e) {
    r.ref_note = "not available: " + reason(e);
  }
  rt::TimingHarness h(o.timing);
  r.ours = h.time([&](CUstream s) { ours.launch(s); });
  if (ref) r.ref = h.time([&](CUstream s) { ref->run(dev.tensors, s); });
  // 1 GiB (half read, half written) next to the problem's own tensors: where that does not
  // fit, the yardstick stays unmeasured (null) rather than failing the bench.
  if (o.copy_bandwidth) {
    try {
      r.copy_gbps = measure_copy_bandwidth();
    } catch (const DeviceOutOfMemory&) {}
  }
  return r;
}

} // namespace tp::perf
