// The CUDA tuning hooks. State shared by the hooks of one problem lives in a shared_ptr, because
// a compile that overran its limit is abandoned on its worker thread and may outlive tune().
#include "autotune/CudaHooks.h"
#include "compile/Lower.h"

#include <mutex>
#include <stdexcept>

#include "compile/CudaKernel.h"
#include "ops/CudaCheck.h"
#include "runtime/DeviceFaults.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Nvrtc.h"
#include "runtime/Timing.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace tp::autotune {

namespace {

constexpr uint64_t kSeed = 3;  // inputs of the timed runs
constexpr int kWarmupRuns = 2; // before each measurement: clocks up, instruction cache warm

struct Shared {
  const ops::Operator* op = nullptr;
  ops::Problem problem;
  std::string arch;
  // The problem's arguments, made once (the first compile needs their shapes).
  std::once_flag args_once;
  std::vector<HostTensor> host;
  // Device state, touched only on the tuner's calling thread (measure, check_correct).
  std::unique_ptr<ops::DeviceArgs> dev;
  std::unique_ptr<rt::TimingHarness> harness;

  const std::vector<HostTensor>& args() {
    std::call_once(args_once, [&] { host = op->make_args(problem, kSeed); });
    return host;
  }
};

/// One compiled candidate: its kernel, and the loaded module once measure has needed it.
struct Artifact {
  Kernel kernel;
  std::unique_ptr<cuda::CudaKernel> loaded;
};

/// The variant CudaKernel will launch for these arguments: TMA needs every TMA-loaded tensor's
/// rows to be 16-byte multiples (device buffers are 256-byte aligned, so rows decide).
cuda::LoweredKernel lower_for_args(const Kernel& k, const std::string& arch,
                                   const std::vector<HostTensor>& args) {
  passes::Target t = passes::Target::parse(arch);
  cuda::LoweredKernel lk = cuda::lower_kernel(k, t);
  for (const cuda::TmaParam& p : lk.tmas) {
    const HostTensor& a = args.at(p.param);
    if (a.shape().back() * dtype_bytes(a.dtype()) % 16 != 0) {
      t.allow_tma = false;
      return cuda::lower_kernel(k, t);
    }
  }
  return lk;
}

CompiledCandidate compile(Shared& s, const ops::Config& c) {
  // Builder, verifier and lowering reject invalid configs with a UserError (verify_failed).
  ops::check_config(*s.op, s.problem, c, s.arch);
  auto art = std::make_shared<Artifact>();
  art->kernel = s.op->build(s.problem, c);
  cuda::LoweredKernel lk = lower_for_args(art->kernel, s.arch, s.args());
  rt::JitKernel j;
  try {
    j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, s.arch, {});
  } catch (const UserError& e) {
    // NVRTC rejecting generated code (or missing) is a compile failure, not an invalid config.
    throw std::runtime_error(reason_text(e));
  }
  CompiledCandidate cc;
  cc.usage = rt::resource_usage(j.compiled.log, lk.entry);
  cc.artifact = art;
  return cc;
}

cuda::CudaKernel& loaded(Shared& s, const CompiledCandidate& cc) {
  auto* art = static_cast<Artifact*>(cc.artifact.get());
  if (!s.dev) s.dev = std::make_unique<ops::DeviceArgs>(ops::DeviceArgs::upload(s.args()));
  if (!art->loaded) {
    // The cubin is in the kernel cache since compile(); this lowers again and loads the module.
    art->loaded = std::make_unique<cuda::CudaKernel>(art->kernel, s.arch);
    art->loaded->prepare(s.dev->tensors);
  }
  return *art->loaded;
}

/// What a fault's message adds to the kernel name: which candidate of which problem ran.
std::string candidate_text(const Shared& s, const ops::Config& c) {
  return "tuning " + s.op->name() + " " + s.problem.shape_str() + " config " + ops::config_str(c);
}

Measurement measure(Shared& s, const ops::Config& c, const CompiledCandidate& cc, int iters) {
  rt::LaunchContext context(candidate_text(s, c));
  cuda::CudaKernel& k = loaded(s, cc);
  if (!s.harness) s.harness = std::make_unique<rt::TimingHarness>();
  rt::Timing t =
      s.harness->time([&](CUstream st) { k.launch(s.dev->tensors, st); }, iters, kWarmupRuns);
  return Measurement{t.samples_ms};
}

/// The CUDA check (fp64 reference on sampled blocks, fresh inputs) run on the candidate's own
/// loaded kernel: exactly the binary that was measured. (A fresh build of the config would emit
/// different buffer names and compile again.)
bool check_correct(Shared& s, const ops::Config& c, const CompiledCandidate& cc, std::string* why) {
  rt::LaunchContext context(candidate_text(s, c) + " (checking it)");
  cuda::CudaKernel& k = loaded(s, cc);
  ops::CheckOptions o;
  o.backend = "cuda";
  o.arch = s.arch;
  o.config = c;
  o.seed = kSeed + 1; // not the timed inputs
  const std::vector<int> outputs = s.op->outputs(s.problem);
  auto run = [&](const Kernel&, std::vector<HostTensor>& args,
                 const std::vector<std::array<int64_t, 3>>&) {
    ops::DeviceArgs d = ops::DeviceArgs::upload(args);
    k.launch(d.tensors);
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    d.download(args, outputs);
  };
  ops::CheckResult r = ops::check_with(*s.op, s.problem, o, run);
  if (!r.passed && why) {
    *why = "max_abs_err " + std::to_string(r.max_abs_err) + ", " + std::to_string(r.bad) + " of " +
           std::to_string(r.checked) + " checked elements out of tolerance (atol " +
           std::to_string(r.atol) + ", rtol " + std::to_string(r.rtol) + ")";
    if (!r.first_bad.empty()) *why += "; first: " + r.first_bad;
  }
  return r.passed;
}

} // namespace

TuneHooks cuda_tune_hooks(const ops::Operator& op, const ops::Problem& p, const std::string& arch) {
  passes::Target::parse(arch); // user error naming the choices for an unknown arch
  auto s = std::make_shared<Shared>();
  s->op = &op;
  s->problem = p;
  s->arch = arch;
  TuneHooks h;
  h.compile = [s](const ops::Config& c) { return compile(*s, c); };
  std::string why;
  std::optional<rt::DeviceInfo> dev = rt::device_info(rt::selected_device_ordinal(), &why);
  if (!dev) {
    h.why_no_measure = "no GPU: " + why;
  } else if (dev->arch != arch) {
    h.why_no_measure = "GPU " + std::to_string(dev->ordinal) + " (" + dev->name + ") is " +
                       dev->arch + ", not " + arch;
  } else {
    h.measure = [s](const ops::Config& c, const CompiledCandidate& cc, int iters) {
      return measure(*s, c, cc, iters);
    };
    h.check_correct = [s](const ops::Config& c, const CompiledCandidate& cc, std::string* why) {
      return check_correct(*s, c, cc, why);
    };
  }
  return h;
}

void register_cuda_tune_hooks() {
  if (!has_default_hooks()) set_default_hooks(cuda_tune_hooks);
}

} // namespace tp::autotune
