// GPU execution of the model.
#include "llama/DeviceExec.h"

#include "dispatch/DeviceRun.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"

namespace tp::models {

namespace {

// Weight initialization on the device: the same splitmix64 stream as uniform_value() (Exec.cpp),
// so host and device models hold the same weights up to the final rounding. Plain CUDA, no
// headers, compiled by NVRTC once.
const char* kFill = R"(
extern "C" __global__ void tp_model_fill(void* out, long long n, unsigned long long seed,
                                         double center, double half_width, int kind) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    unsigned long long z = seed * 0x9E3779B97F4A7C15ull + (unsigned long long)i +
                           0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double u = (double)(z >> 40) * (1.0 / 16777216.0);
    double v = center + half_width * (2.0 * u - 1.0);
    if (kind == 2) {
      ((float*)out)[i] = (float)v;
    } else if (kind == 1) {
      unsigned short h;
      asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(v));
      ((unsigned short*)out)[i] = h;
    } else {
      unsigned u32 = __float_as_uint((float)v);
      ((unsigned short*)out)[i] = (unsigned short)((u32 + 0x7fffu + ((u32 >> 16) & 1u)) >> 16);
    }
  }
}
)";

cuda::DeviceTensor tensor(const Buf& b) {
  return {static_cast<CUdeviceptr>(b.dev), b.dtype, b.shape};
}

ops::DeviceView view(const Buf& b) {
  return {b.dev, b.dtype, b.shape};
}

} // namespace

void DeviceExec::compile_helpers(const std::string& arch) {
  rt::jit_compile_only(std::string("// TilePilot model weights\n") + kFill, "tp_model_fill",
                       "models tp_model_fill", arch, {});
}

namespace {

ops::DeviceIdentity gpu_or_explain() {
  std::string why;
  if (!rt::device_info(rt::selected_device_ordinal(), &why))
    user_error() << "the model on the GPU needs one: " << why
                 << "; without a GPU, run the tiny model on the interpreter (tilepilot model "
                    "--backend cpu --preset tiny)";
  return dispatch::current_device();
}

} // namespace

DeviceExec::DeviceExec() : device_(gpu_or_explain()) {
  baseline_used_ = peak_used_ = device_used_bytes();
}

DeviceExec::~DeviceExec() {
  for (CUevent e : pool_)
    rt::driver().cuEventDestroy(e);
}

Buf DeviceExec::alloc(DType t, std::vector<int64_t> shape) {
  Buf b;
  b.dtype = t;
  b.shape = std::move(shape);
  store_.emplace_back(std::max<size_t>(b.bytes(), 16));
  bytes_ += store_.back().bytes();
  b.dev = store_.back().ptr();
  return b;
}

void DeviceExec::fill_uniform(Buf& b, uint64_t seed, double center, double half_width) {
  if (!fill_fn_)
    fill_fn_ = rt::jit_load(std::string("// TilePilot model weights\n") + kFill, "tp_model_fill",
                            "models tp_model_fill", device_.arch, {})
                   .fn;
  CUdeviceptr out = b.dev;
  long long n = b.numel();
  unsigned long long s = seed;
  int kind = b.dtype == DType::f32 ? 2 : b.dtype == DType::f16 ? 1 : 0;
  void* args[] = {&out, &n, &s, &center, &half_width, &kind};
  rt::LaunchConfig cfg;
  cfg.grid = {static_cast<unsigned>(std::min<long long>((n + 255) / 256, 16384)), 1, 1};
  cfg.block = {256, 1, 1};
  cfg.stream = stream();
  rt::launch(fill_fn_, cfg, args);
}

void DeviceExec::upload(Buf& b, const HostTensor& h) {
  internal_assert(h.shape() == b.shape && h.dtype() == b.dtype) << "upload: shape mismatch";
  // A synchronous copy from pageable memory may return before the DMA lands; the copy and the
  // stream's later work must not overlap.
  TILEPILOT_CU(rt::driver().cuMemcpyHtoD(b.dev, h.data(), h.bytes()));
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
}

HostTensor DeviceExec::download(const Buf& b) {
  synchronize(); // the stream does not synchronize with the legacy stream the copy uses
  HostTensor h(b.dtype, b.shape);
  TILEPILOT_CU(rt::driver().cuMemcpyDtoH(h.data(), b.dev, h.bytes()));
  return h;
}

void DeviceExec::run(const Kernel& k, const std::vector<const Buf*>& args) {
  auto& ck = kernels_[k.ptr().get()];
  if (!ck) ck = std::make_unique<cuda::CudaKernel>(k, device_.arch);
  std::vector<cuda::DeviceTensor> t;
  for (const Buf* b : args)
    t.push_back(tensor(*b));
  ck->launch(t, stream());
}

void DeviceExec::gemm(const Buf& A, const Buf& B, const Buf& C, const std::string& layout) {
  dispatcher().gemm(view(A), view(B), view(C), layout, stream());
}

void DeviceExec::attention(const Buf& Q, const Buf& K, const Buf& V, const Buf& O, bool causal) {
  dispatcher().attention(view(Q), view(K), view(V), view(O), causal, stream());
}

CUevent DeviceExec::event() {
  if (next_event_ == pool_.size()) {
    CUevent e = nullptr;
    TILEPILOT_CU(rt::driver().cuEventCreate(&e, CU_EVENT_DEFAULT));
    pool_.push_back(e);
  }
  return pool_[next_event_++];
}

void DeviceExec::op_begin(const std::string&) {
  if (!profiling_) return;
  open_ = event();
  TILEPILOT_CU(rt::driver().cuEventRecord(open_, stream()));
}

void DeviceExec::op_end(const std::string& label) {
  if (!profiling_) return;
  CUevent stop = event();
  TILEPILOT_CU(rt::driver().cuEventRecord(stop, stream()));
  marks_.push_back({label, {open_, stop}});
  // Workspaces (cuBLASLt, cuDNN) are allocated inside the operator that first needs them.
  synchronize();
  peak_used_ = std::max(peak_used_, device_used_bytes());
}

OpTimes DeviceExec::collect_op_times() {
  synchronize();
  OpTimes out;
  for (const auto& [label, ev] : marks_) {
    float ms = 0;
    TILEPILOT_CU(rt::driver().cuEventElapsedTime(&ms, ev.first, ev.second));
    out[label] += ms;
  }
  marks_.clear();
  next_event_ = 0;
  return out;
}

uint64_t DeviceExec::device_used_bytes() const {
  size_t free_b = 0, total_b = 0;
  TILEPILOT_CU(rt::driver().cuMemGetInfo(&free_b, &total_b));
  return total_b - free_b;
}

} // namespace tp::models
