// tp::compile and CompiledKernel: the public face of src/codegen/cuda's CudaKernel. Arguments
// are checked here for what the public types add (kinds of argument: tensor or number, strides
// for contiguous parameters); the kernel's own rules (dtype, rank, Dims, strides, alignment,
// index width) are checked by the launch below.
#include <cmath>
#include <mutex>

#include "compile/CudaKernel.h"
#include "ir/IRPrinter.h"
#include "runtime/ResourceUsage.h"
#include "tilepilot/compile.h"

namespace tp {

struct CompiledKernel::State {
  Kernel kernel;
  std::string arch;
  bool bypass_cache = false;
  std::mutex mu; // CudaKernel builds its variants lazily
  std::unique_ptr<cuda::CudaKernel> cuda;
  rt::JitKernel compiled[2]; // compile-only products per variant (ptx, ptxas log)
  bool have_compiled[2] = {false, false};

  const rt::JitKernel& compile_only(bool tma) {
    std::lock_guard<std::mutex> lock(mu);
    if (!have_compiled[tma]) {
      const cuda::LoweredKernel& lk = cuda->lowered(tma);
      compiled[tma] =
          rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, arch, {}, bypass_cache);
      have_compiled[tma] = true;
    }
    return compiled[tma];
  }
};

namespace {

CompiledKernel::State& need(const std::shared_ptr<CompiledKernel::State>& s) {
  if (!s) user_error() << "this CompiledKernel is empty; make one with tp::compile(kernel)";
  return *s;
}

/// The launch's tensors (in params order) and scalar values (in k.scalars order).
struct LaunchArgs {
  std::vector<cuda::DeviceTensor> tensors;
  std::vector<double> scalars;
};

LaunchArgs device_args(const ir::KernelNode& k, const std::vector<Arg>& args) {
  std::vector<ir::ParamRef> order = k.launch_order();
  if (args.size() != order.size())
    user_error() << "kernel '" << k.name << "' takes " << order.size() << " arguments, got "
                 << args.size();
  LaunchArgs out;
  out.tensors.resize(k.params.size());
  out.scalars.resize(k.scalars.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (order[i].scalar) {
      const Var& v = k.scalars[order[i].index];
      if (!args[i].is_scalar())
        user_error() << "kernel '" << k.name << "': argument " << i << " for scalar '" << v.name()
                     << "' (" << dtype_name(v.dtype()) << ") is a tensor; pass a number";
      double x = args[i].as_double();
      if (v.dtype() == DType::i32 && args[i].is_float() && x != std::floor(x))
        user_error() << "kernel '" << k.name << "': scalar '" << v.name() << "' is i32, got " << x
                     << "; pass an integer";
      out.scalars[order[i].index] =
          v.dtype() == DType::i32 ? static_cast<double>(args[i].as_int()) : x;
      continue;
    }
    const ir::Buffer& b = k.params[order[i].index];
    const std::string& name = b->name;
    if (args[i].is_scalar())
      user_error() << "kernel '" << k.name << "': argument " << i << " for tensor '" << name
                   << "' is a number; pass a DeviceTensor or DeviceArray";
    const DeviceTensor& t = args[i].tensor();
    if (!t.strides.empty() && t.strides.size() != t.shape.size())
      user_error() << "kernel '" << k.name << "': tensor '" << name << "' has " << t.shape.size()
                   << " dimensions but " << t.strides.size() << " strides";
    if (b->strides.empty() && !t.contiguous())
      user_error() << "kernel '" << k.name << "': tensor '" << name
                   << "' is not contiguous; this kernel's parameter takes a dense row-major "
                      "tensor (declare it strided, or pass a contiguous copy)";
    // A contiguous parameter takes no strides; a strided one gets the argument's (all of
    // them, dense ones included, so that the kernel's stride parameters are always bound).
    std::vector<int64_t> st = b->strides.empty() ? std::vector<int64_t>{} : t.element_strides();
    out.tensors[order[i].index] = {static_cast<CUdeviceptr>(t.ptr), t.dtype, t.shape, st};
  }
  return out;
}

} // namespace

CompiledKernel compile(const Kernel& k, const CompileOptions& opts) {
  if (!k.defined()) user_error() << "tp::compile: the kernel is empty (not built)";
  auto s = std::make_shared<CompiledKernel::State>();
  s->kernel = k;
  s->arch = opts.arch.empty() ? current_arch() : opts.arch;
  s->bypass_cache = opts.bypass_cache;
  s->cuda = std::make_unique<cuda::CudaKernel>(k, s->arch, opts.bypass_cache);
  s->cuda->lowered(true); // lowering errors surface at compile(), not at the first launch
  CompiledKernel ck;
  ck.state_ = std::move(s);
  return ck;
}

const Kernel& CompiledKernel::kernel() const {
  return need(state_).kernel;
}
const std::string& CompiledKernel::arch() const {
  return need(state_).arch;
}

std::string CompiledKernel::source(bool tma) const {
  State& s = need(state_);
  std::lock_guard<std::mutex> lock(s.mu);
  return s.cuda->lowered(tma).source;
}

std::string CompiledKernel::lowered(bool tma) const {
  State& s = need(state_);
  std::lock_guard<std::mutex> lock(s.mu);
  return s.cuda->lowered(tma).lowered_text;
}

std::string CompiledKernel::ptx(bool tma) const {
  return need(state_).compile_only(tma).compiled.ptx;
}

Resources CompiledKernel::resources(bool tma) const {
  State& s = need(state_);
  const rt::JitKernel& j = s.compile_only(tma);
  int threads;
  int64_t smem;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    const cuda::LoweredKernel& lk = s.cuda->lowered(tma);
    threads = lk.block_threads;
    smem = lk.smem_bytes;
  }
  rt::ResourceUsage u = rt::resource_usage(j.compiled.log);
  Resources r;
  r.threads = threads;
  r.registers = u.registers;
  r.spill_bytes = u.spill_store_bytes + u.spill_load_bytes;
  r.smem_dynamic = smem;
  r.smem_static = u.shared_static_bytes;
  r.wgmma_serialized = u.wgmma_serialized;
  return r;
}

std::map<std::string, std::string> CompiledKernel::config() const {
  State& s = need(state_);
  std::map<std::string, std::string> c(s.kernel->attrs.begin(), s.kernel->attrs.end());
  c["arch"] = s.arch;
  c["threads"] = std::to_string(s.kernel->threads);
  std::string g;
  for (size_t i = 0; i < s.kernel->grid.size(); ++i)
    g += (i ? ", " : "") + ir::to_string(s.kernel->grid[i]);
  c["grid"] = "(" + g + ")";
  return c;
}

void CompiledKernel::launch(const std::vector<Arg>& args, Stream stream) const {
  State& s = need(state_);
  LaunchArgs dev = device_args(s.kernel.node(), args);
  std::lock_guard<std::mutex> lock(s.mu);
  s.cuda->launch(dev.tensors, dev.scalars, reinterpret_cast<CUstream>(stream));
}

CompileTimes CompiledKernel::prepare(const std::vector<Arg>& args) const {
  State& s = need(state_);
  LaunchArgs dev = device_args(s.kernel.node(), args);
  std::lock_guard<std::mutex> lock(s.mu);
  const cuda::CompileTimings& t = s.cuda->prepare(dev.tensors);
  return {t.passes, t.nvrtc, t.module_load, t.lookup, t.cache_hit};
}

} // namespace tp
