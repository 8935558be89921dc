// The CUDA tuning hooks. State shared by the hooks of one problem lives in a shared_ptr, because
// a compile that overran its limit is abandoned on its worker thread and may outlive tune().
// Each measuring device has its own inputs, timing stream and loaded modules; a hook call binds
// its thread to that device (rt::DeviceScope), so the runtime's context, module cache and
// launches all go there.
#include "autotune/CudaHooks.h"
#include "compile/Lower.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "compile/CudaKernel.h"
#include "ops/CudaCheck.h"
#include "ops/CudaProgram.h"
#include "runtime/DeviceFaults.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Nvrtc.h"
#include "runtime/ThreadDevice.h"
#include "runtime/Timing.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace tp::autotune {

namespace {

constexpr uint64_t kSeed = 3;  // inputs of the timed runs
constexpr int kWarmupRuns = 2; // before each measurement: clocks up, instruction cache warm

/// What measuring on one device needs; touched only by calls for that device, which the tuner
/// never overlaps. Freed with that device's context current.
struct DeviceState {
  int ordinal = 0;
  std::unique_ptr<ops::DeviceArgs> dev;
  std::unique_ptr<rt::TimingHarness> harness;
};

struct Shared {
  const ops::Operator* op = nullptr;
  ops::Problem problem;
  std::string arch;
  // The problem's arguments, made once (the first compile needs their shapes).
  std::once_flag args_once;
  std::vector<HostTensor> host;
  // One entry per measuring device (hook device index), fixed before the first hook runs.
  std::vector<DeviceState> devices;

  ~Shared() {
    for (DeviceState& d : devices) {
      if (!d.dev && !d.harness) continue;
      rt::DeviceScope on(d.ordinal);
      try {
        rt::ensure_context(); // the stream and buffers are freed in their own context
      } catch (const std::exception&) {}
      d.harness.reset();
      d.dev.reset();
    }
  }

  const std::vector<HostTensor>& args() {
    std::call_once(args_once, [&] { host = op->make_args(problem, kSeed); });
    return host;
  }
};

/// One compiled candidate: its program, and per device the modules loaded there once measure
/// has needed them (a module belongs to one context).
struct Artifact {
  ops::KernelProgram program;
  std::vector<std::unique_ptr<ops::CudaProgram>> loaded; // by hook device index
  std::vector<int> ordinals;                             // the GPU of each index

  // The tuner drops an artifact on its own thread; each kernel's buffers go back to its GPU.
  ~Artifact() {
    for (size_t d = 0; d < loaded.size(); ++d) {
      if (!loaded[d]) continue;
      rt::DeviceScope on(ordinals.at(d));
      try {
        rt::ensure_context();
      } catch (const std::exception&) {}
      loaded[d].reset();
    }
  }
};

/// The variant CudaKernel will launch for arguments shaped like `specs` (the step's parameters).
cuda::LoweredKernel lower_for_args(const Kernel& k, const std::string& arch,
                                   const std::vector<ops::ArgSpec>& specs) {
  std::vector<ir::ArgDesc> descs;
  for (const ops::ArgSpec& a : specs)
    descs.push_back({a.dtype, a.shape});
  return cuda::lower_for_shapes(k, passes::Target::parse(arch), descs);
}

/// A program's usage as the tuner prunes on it: its steps run one at a time, so the most
/// registers (and stack, shared memory, barriers) of any step, and the spills of all of them.
void add_step_usage(rt::ResourceUsage& sum, const rt::ResourceUsage& u, bool first) {
  if (first) {
    sum = u;
    return;
  }
  sum.registers =
      (sum.registers < 0 || u.registers < 0) ? -1 : std::max(sum.registers, u.registers);
  sum.barriers = std::max(sum.barriers, u.barriers);
  sum.spill_store_bytes += u.spill_store_bytes;
  sum.spill_load_bytes += u.spill_load_bytes;
  sum.stack_bytes = std::max(sum.stack_bytes, u.stack_bytes);
  sum.shared_static_bytes = std::max(sum.shared_static_bytes, u.shared_static_bytes);
  sum.wgmma_serialized = sum.wgmma_serialized || u.wgmma_serialized;
  sum.wgmma_fences_injected += u.wgmma_fences_injected;
  sum.raw += u.raw;
}

CompiledCandidate compile(Shared& s, const ops::Config& c) {
  // Builder, verifier and lowering reject invalid configs with a UserError (verify_failed).
  ops::check_config(*s.op, s.problem, c, s.arch);
  auto art = std::make_shared<Artifact>();
  art->program = ops::checked_program(*s.op, s.problem, c);
  art->loaded.resize(s.devices.size());
  for (const DeviceState& d : s.devices)
    art->ordinals.push_back(d.ordinal);
  const std::vector<ops::ArgSpec> call = s.op->arg_specs(s.problem);
  CompiledCandidate cc;
  for (size_t i = 0; i < art->program.steps.size(); ++i) {
    cuda::LoweredKernel lk = lower_for_args(art->program.steps[i].kernel, s.arch,
                                            ops::step_arg_specs(art->program, i, call));
    rt::JitKernel j;
    try {
      j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, s.arch, {});
    } catch (const UserError& e) {
      // NVRTC rejecting generated code (or missing) is a compile failure, not an invalid config.
      throw std::runtime_error(reason_text(e));
    }
    add_step_usage(cc.usage, rt::resource_usage(j.compiled.log, lk.entry), i == 0);
  }
  cc.artifact = art;
  return cc;
}

// Called with device `d` bound on this thread (a DeviceScope).
ops::CudaProgram& loaded(Shared& s, int d, const CompiledCandidate& cc) {
  auto* art = static_cast<Artifact*>(cc.artifact.get());
  DeviceState& ds = s.devices.at(d);
  if (!ds.dev) ds.dev = std::make_unique<ops::DeviceArgs>(ops::DeviceArgs::upload(s.args()));
  std::unique_ptr<ops::CudaProgram>& k = art->loaded.at(d);
  if (!k) {
    // The cubins are in the kernel cache since compile(); this lowers again and loads the
    // modules into this device's context.
    k = std::make_unique<ops::CudaProgram>(art->program, s.arch);
    k->prepare(ds.dev->tensors);
  }
  return *k;
}

/// What a fault's message adds to the kernel name: which candidate of which problem ran.
std::string candidate_text(const Shared& s, const ops::Config& c) {
  return "tuning " + s.op->name() + " " + s.problem.shape_str() + " config " + ops::config_str(c);
}

Measurement measure(Shared& s, int d, const ops::Config& c, const CompiledCandidate& cc,
                    int iters) {
  DeviceState& ds = s.devices.at(d);
  rt::DeviceScope on(ds.ordinal);
  rt::LaunchContext context(candidate_text(s, c));
  ops::CudaProgram& k = loaded(s, d, cc);
  if (!ds.harness) ds.harness = std::make_unique<rt::TimingHarness>();
  rt::Timing t =
      ds.harness->time([&](CUstream st) { k.launch(ds.dev->tensors, st); }, iters, kWarmupRuns);
  return Measurement{t.samples_ms};
}

/// The CUDA check (fp64 reference on sampled blocks, fresh inputs) run on the candidate's own
/// loaded program: exactly the binaries that were measured. (A fresh build of the config would
/// emit different buffer names and compile again.)
bool check_correct(Shared& s, int d, const ops::Config& c, const CompiledCandidate& cc,
                   std::string* why) {
  rt::DeviceScope on(s.devices.at(d).ordinal);
  rt::LaunchContext context(candidate_text(s, c) + " (checking it)");
  ops::CudaProgram& k = loaded(s, d, cc);
  ops::CheckOptions o;
  o.backend = "cuda";
  o.arch = s.arch;
  o.config = c;
  o.seed = kSeed + 1; // not the timed inputs
  const std::vector<int> outputs = s.op->outputs(s.problem);
  auto run = [&](const ops::KernelProgram&, std::vector<HostTensor>& args,
                 const std::vector<std::array<int64_t, 3>>&) {
    ops::DeviceArgs d = ops::DeviceArgs::upload(args);
    k.launch(d.tensors);
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    d.download(args, outputs);
  };
  ops::CheckResult r = ops::check_program_with(*s.op, s.problem, o, run);
  if (!r.passed && why) {
    *why = "max_abs_err " + std::to_string(r.max_abs_err) + ", " + std::to_string(r.bad) + " of " +
           std::to_string(r.checked) + " checked elements out of tolerance (atol " +
           std::to_string(r.atol) + ", rtol " + std::to_string(r.rtol) + ")";
    if (!r.first_bad.empty()) *why += "; first: " + r.first_bad;
  }
  return r.passed;
}

} // namespace

int tune_device_limit(const char* value, int available) {
  if (!value || !*value) return available;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(value, &end, 10);
  // strtol alone would take " 2" and "+2": a count is digits only.
  bool ok = std::isdigit(static_cast<unsigned char>(value[0])) && *end == 0 && errno == 0 &&
            v >= 1 && (available < 0 || v <= available);
  if (!ok) {
    auto e = user_error();
    e << "TILEPILOT_TUNE_DEVICES='" << value
      << "' is not a device count: set it to a whole number ";
    if (available < 0)
      e << ">= 1";
    else
      e << "from 1 to " << available << " (the GPUs here that can measure)";
    e << ", or unset it to measure on every GPU of the target arch";
  }
  return static_cast<int>(v);
}

std::vector<int> tune_device_ordinals(const rt::DeviceInfo& first, std::string* note) {
  std::vector<int> same{first.ordinal};
  std::string skipped;
  for (int i = 0, n = rt::device_count(); i < n; ++i) {
    if (i == first.ordinal) continue;
    std::string why;
    std::optional<rt::DeviceInfo> d = rt::device_info(i, &why);
    if (d && d->arch == first.arch) {
      same.push_back(i);
      continue;
    }
    // Timings of another arch would not compare with the first device's.
    skipped += "; GPU " + std::to_string(i) +
               (d ? " (" + d->name + ") is " + d->arch + ", not " + first.arch : ": " + why) +
               ", not used";
  }
  int keep = tune_device_limit(std::getenv("TILEPILOT_TUNE_DEVICES"), int(same.size()));
  same.resize(keep);
  std::string list;
  for (int o : same)
    list += (list.empty() ? "" : ", ") + std::to_string(o);
  *note = "measuring on " + std::to_string(keep) + " GPU(s): " + list + skipped;
  return same;
}

TuneHooks cuda_tune_hooks(const ops::Operator& op, const ops::Problem& p, const std::string& arch) {
  passes::Target::parse(arch); // user error naming the choices for an unknown arch
  // A malformed TILEPILOT_TUNE_DEVICES is an error with or without a GPU.
  tune_device_limit(std::getenv("TILEPILOT_TUNE_DEVICES"), -1);
  auto s = std::make_shared<Shared>();
  s->op = &op;
  s->problem = p;
  s->arch = arch;
  TuneHooks h;
  std::string why;
  std::optional<rt::DeviceInfo> dev = rt::device_info(rt::selected_device_ordinal(), &why);
  if (!dev) {
    h.why_no_measure = "no GPU: " + why;
  } else if (dev->arch != arch) {
    h.why_no_measure = "GPU " + std::to_string(dev->ordinal) + " (" + dev->name + ") is " +
                       dev->arch + ", not " + arch;
  } else {
    for (int ordinal : tune_device_ordinals(*dev, &h.devices_note))
      s->devices.push_back(DeviceState{ordinal, nullptr, nullptr});
    h.devices = static_cast<int>(s->devices.size());
    h.measure = [s](int d, const ops::Config& c, const CompiledCandidate& cc, int iters) {
      return measure(*s, d, c, cc, iters);
    };
    h.check_correct = [s](int d, const ops::Config& c, const CompiledCandidate& cc,
                          std::string* why) { return check_correct(*s, d, c, cc, why); };
  }
  // Set last: compile sizes each artifact's per-device modules by s->devices.
  h.compile = [s](const ops::Config& c) { return compile(*s, c); };
  return h;
}

void register_cuda_tune_hooks() {
  if (!has_default_hooks()) set_default_hooks(cuda_tune_hooks);
}

} // namespace tp::autotune
