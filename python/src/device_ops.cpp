// The CUDA backend: DLPack device tensors (torch CUDA tensors, ...) go to tp::ops dispatch as
// views of their memory - no copies - on the stream the caller passes (its current stream), so
// the call orders with the caller's other work. The dispatcher runs the released pinned kernel
// when the problem lies inside its tested matrix and its own fallback otherwise, counted per
// reason and logged once through Python's `logging` ("tilepilot" logger).
#include <memory>
#include <mutex>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/set.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <sstream>

#include "bindings.h"
#include "ops/Operator.h"
#include "runtime/Driver.h"
#include "tilepilot/dispatch.h"
#include "tilepilot/error.h"

namespace nb = nanobind;

namespace tp::py {

namespace {

// The module's dispatcher. Created on first use from $TILEPILOT_RELEASE (as the C++ default
// dispatcher is) or by configure(). Never destroyed: tearing it down at exit would race the CUDA
// driver's own teardown, and the process is ending anyway.
std::mutex g_mu;
std::shared_ptr<ops::Dispatcher>* g_dispatcher = nullptr;

void log_to_python(const std::string& line) {
  nb::gil_scoped_acquire gil; // called from inside dispatch, where the GIL is released
  try {
    nb::module_::import_("logging")
        .attr("getLogger")("tilepilot")
        .attr("warning")("dispatch: %s", line);
  } catch (const std::exception&) {
    // Logging must never turn a working call into a failing one (e.g. during shutdown).
  }
}

std::vector<std::string> releases_from_env() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("TILEPILOT_RELEASE")) {
    std::stringstream ss(env);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) dirs.push_back(d);
  }
  return dirs;
}

std::shared_ptr<ops::Dispatcher> make(ops::DispatchOptions o) {
  o.log = log_to_python;
  return std::make_shared<ops::Dispatcher>(std::move(o));
}

std::shared_ptr<ops::Dispatcher> dispatcher() {
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_dispatcher) {
    ops::DispatchOptions o;
    o.releases = releases_from_env();
    g_dispatcher = new std::shared_ptr<ops::Dispatcher>(make(std::move(o)));
  }
  return *g_dispatcher;
}

void configure(const std::vector<std::string>& releases, const std::set<std::string>& force,
               const std::set<std::string>& disable_libraries) {
  ops::DispatchOptions o;
  o.releases = releases;
  o.force_fallback = force;
  o.disable_libraries = disable_libraries;
  auto d = make(std::move(o)); // loads the releases: errors surface before anything changes
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_dispatcher)
    g_dispatcher = new std::shared_ptr<ops::Dispatcher>(std::move(d));
  else
    *g_dispatcher = std::move(d);
}

DType dlpack_dtype(const nb::ndarray<>& t, const char* name) {
  nb::dlpack::dtype d = t.dtype();
  if (d.lanes == 1 && d.code == uint8_t(nb::dlpack::dtype_code::Float) && d.bits == 32)
    return DType::f32;
  if (d.lanes == 1 && d.code == uint8_t(nb::dlpack::dtype_code::Float) && d.bits == 16)
    return DType::f16;
  if (d.lanes == 1 && d.code == uint8_t(nb::dlpack::dtype_code::Bfloat) && d.bits == 16)
    return DType::bf16;
  user_error() << name << " has DLPack dtype (code " << int(d.code) << ", " << int(d.bits)
               << " bits); the CUDA backend takes bfloat16, float16 or float32 tensors";
  return DType::f32;
}

ops::DeviceView view(const nb::ndarray<>& t, const char* name) {
  if (t.device_type() != nb::device::cuda::value)
    user_error() << name << " is not a CUDA tensor (DLPack device type " << t.device_type()
                 << "); backend='cuda' takes CUDA tensors, backend='cpu' takes NumPy arrays";
  if (t.device_id() != rt::selected_device_ordinal())
    user_error() << name << " is on cuda:" << t.device_id() << " but TilePilot runs on device "
                 << rt::selected_device_ordinal() << "; set TILEPILOT_DEVICE=" << t.device_id()
                 << " before the first call, or move the tensor";
  ops::DeviceView v;
  v.dtype = dlpack_dtype(t, name);
  int64_t expect = 1; // row-major strides, in elements; size-1 dims may have any stride
  bool dense = true;
  for (int i = int(t.ndim()) - 1; i >= 0; --i) {
    dense = dense && (t.shape(i) == 1 || t.stride(i) == expect);
    expect *= int64_t(t.shape(i));
  }
  v.shape.assign(t.shape_ptr(), t.shape_ptr() + t.ndim());
  // A view keeps its strides: the dispatcher takes it where the operator reads views in place
  // (Operator::strided_arg) and otherwise says to pass a contiguous copy.
  if (!dense) v.strides.assign(t.stride_ptr(), t.stride_ptr() + t.ndim());
  v.ptr = reinterpret_cast<uint64_t>(t.data());
  return v;
}

/// Any registered operator on the GPU through dispatch: `tensors` in its parameter order
/// (outputs written in place), its string options, enqueued on `stream`.
void run_cuda(const std::string& op, const std::vector<nb::ndarray<>>& tensors,
              const std::map<std::string, std::string>& options, uintptr_t stream) {
  std::vector<ops::DeviceView> views;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = op + " tensor " + std::to_string(i);
    views.push_back(view(tensors[i], name.c_str()));
  }
  auto d = dispatcher();
  nb::gil_scoped_release unlocked;
  d->run(op, views, options, reinterpret_cast<void*>(stream));
}

nb::dict decide(const std::string& op, const std::map<std::string, std::string>& shape,
                const std::string& dtype, bool device) {
  auto t = parse_dtype(dtype);
  if (!t) user_error() << "dtype '" << dtype << "' is not known; use bf16, f16 or f32";
  ops::DispatchDecision r = dispatcher()->decide(op, shape, *t, device);
  nb::dict out;
  out["pinned"] = r.pinned;
  out["reason"] = r.pinned ? std::string() : std::string(ops::fallback_reason_name(r.reason));
  out["why"] = r.why;
  out["config"] = r.config;
  return out;
}

/// Pins each problem of `op` to the operator's default config on the current GPU (`device`) or
/// on the CPU interpreter, as an in-memory release installed into the module's dispatcher (as
/// the model path's --pin-defaults does). Replaces the operator's release, if it had one.
nb::dict pin_defaults(const std::string& op,
                      const std::vector<std::map<std::string, std::string>>& shapes,
                      const std::string& dtype, bool device) {
  const ops::Operator& o = ops::find_operator(op); // names the known operators if not
  auto t = parse_dtype(dtype);
  if (!t) user_error() << "dtype '" << dtype << "' is not known; use bf16, f16 or f32";
  if (shapes.empty())
    user_error() << "pin_defaults: no " << op << " shapes given; pass at least one";
  ops::DeviceIdentity dev{"CPU interpreter", "cpu"};
  if (device) {
    try {
      dev = ops::current_device();
    } catch (const UserError& e) {
      std::string why = e.what();
      if (why.rfind("error: ", 0) == 0) why.erase(0, 7);
      why = why.substr(0, why.find("; on a machine without one")); // C++ advice
      user_error() << "pin_defaults(device=True) pins for the current GPU, and there is none ("
                   << why << "); device=False pins for the CPU interpreter";
    }
  }
  std::vector<ops::Pin> pins;
  std::set<std::string> seen;
  nb::list listed;
  for (size_t i = 0; i < shapes.size(); ++i) {
    ops::Problem p;
    try {
      p = o.parse(shapes[i], *t);
    } catch (const UserError& e) {
      std::string text, why = e.what();
      for (const auto& [k, v] : shapes[i])
        text += (text.empty() ? "" : ",") + k + "=" + v;
      if (why.rfind("error: ", 0) == 0) why.erase(0, 7);
      user_error() << "pin_defaults: " << op << " shape " << i << " ('" << text
                   << "') is not valid: " << why;
    }
    if (!seen.insert(p.shape_str()).second) continue; // one pin per problem
    ops::Config c = o.default_config(p, dev.arch);
    ops::check_config(o, p, c, dev.arch);
    nb::dict e;
    e["shape"] = p.shape_str();
    e["config"] = c;
    listed.append(e);
    pins.push_back({std::move(p), std::move(c)});
  }
  auto d = dispatcher();
  std::string replaced;
  d->has_release(op, &replaced);
  d->pin(op, dev, pins);
  nb::dict out;
  out["op"] = op;
  out["dtype"] = std::string(dtype_name(*t));
  out["device"] = dev.name;
  out["arch"] = dev.arch;
  out["source"] = std::string("defaults");
  out["pins"] = listed;
  out["replaced"] = replaced;
  return out;
}

nb::dict counters(const std::string& op) {
  ops::OpCounters c = dispatcher()->counters(op);
  nb::dict reasons;
  for (int i = 0; i < ops::kFallbackReasons; ++i)
    if (c.fallback[i]) reasons[ops::fallback_reason_name(ops::FallbackReason(i))] = c.fallback[i];
  nb::dict out;
  out["pinned"] = c.pinned;
  out["fallbacks"] = c.fallbacks();
  out["fallback_reasons"] = reasons;
  out["fallback_impl"] = c.fallback_impl;
  return out;
}

/// (true, "NVIDIA H200 (sm_90a), device 0") or (false, why there is no usable GPU).
std::pair<bool, std::string> cuda_status() {
  std::string why;
  int ordinal = 0;
  try {
    ordinal = rt::selected_device_ordinal();
  } catch (const Error& e) {
    return {false, e.what()};
  }
  auto info = rt::device_info(ordinal, &why);
  if (!info) return {false, why};
  return {true, info->name + " (" + info->arch + "), device " + std::to_string(ordinal)};
}

} // namespace

void bind_device_ops(nb::module_& m) {
  m.def("run_cuda", &run_cuda, nb::arg("op"), nb::arg("tensors"), nb::arg("options"),
        nb::arg("stream"),
        "Any operator on the GPU through dispatch (tensors in parameter order, outputs written "
        "in place), enqueued on `stream`.");
  m.def("configure", &configure, nb::arg("releases"), nb::arg("force_fallback"),
        nb::arg("disable_libraries"), "Replaces the module's dispatcher.");
  m.def("decide", &decide, nb::arg("op"), nb::arg("shape"), nb::arg("dtype"), nb::arg("device"),
        "Where a problem would go (pinned or fallback, and why), without running it.");
  m.def("pin_defaults", &pin_defaults, nb::arg("op"), nb::arg("shapes"), nb::arg("dtype"),
        nb::arg("device"),
        "Pins problems to the operator's default config (in-memory release) in the dispatcher.");
  m.def("counters", &counters, nb::arg("op"));
  m.def("reset_counters", [] { dispatcher()->reset_counters(); });
  m.def("dispatch_summary", [] { return dispatcher()->summary(); });
  m.def("cuda_status", &cuda_status);
  m.def("selected_device", [] { return rt::selected_device_ordinal(); });
}

} // namespace tp::py
