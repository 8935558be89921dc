// Device execution of dispatched calls.
#include "dispatch/DeviceRun.h"

#include <algorithm>

#include "ops/reference/GpuReference.h"
#include "ops/vendor/CublasLt.h"
#include "ops/vendor/CudnnAttention.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "runtime/Nvrtc.h"

namespace tp::dispatch {

namespace {

// f32 -> bf16 / f16 with round-to-nearest-even, as the kernels' stores round. Plain CUDA with
// no headers, like the GPU references, so it compiles anywhere NVRTC does.
const char* kConvert = R"(
extern "C" __global__ void tp_f32_to_16(const float* in, unsigned short* out, long long n,
                                        int bf16) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float f = in[i];
    unsigned short h;
    if (bf16) {
      unsigned u = __float_as_uint(f);
      h = (u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)0x7fc0
                                          : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    } else {
      asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    }
    out[i] = h;
  }
}
)";

} // namespace

void compile_convert_kernel(const std::string& arch) {
  rt::jit_compile_only(std::string("// TilePilot dispatch conversion\n") + kConvert, "tp_f32_to_16",
                       "dispatch tp_f32_to_16", arch, {});
}

ops::DeviceIdentity current_device() {
  std::string why;
  auto info = rt::device_info(rt::selected_device_ordinal(), &why);
  if (!info)
    user_error() << "dispatch: device tensors need a GPU: " << why
                 << "; on a machine without one, call the host-tensor overloads";
  return {info->name, info->arch};
}

DeviceRun::DeviceRun(std::set<std::string> disabled,
                     std::function<void(const std::string&, const std::string&)> note)
    : disabled_(std::move(disabled)), note_(std::move(note)) {
  arch_ = current_device().arch;
  rt::ensure_context();
}

DeviceRun::~DeviceRun() = default;

std::shared_ptr<cuda::CudaKernel> DeviceRun::kernel(const Kernel& k) {
  return std::make_shared<cuda::CudaKernel>(k, arch_);
}

void DeviceRun::prepare(cuda::CudaKernel& ck, const std::vector<cuda::DeviceTensor>& args,
                        bool* missing) {
  *missing = false;
  if (disabled("NVRTC")) {
    *missing = true;
    user_error() << "NVRTC is disabled (DispatchOptions::disable_libraries)";
  }
  try {
    ck.prepare(args);
  } catch (const Error&) {
    // A cubin already in the kernel cache loads without NVRTC; only a failed compile with
    // NVRTC absent is a missing library rather than a config that does not compile.
    std::string why;
    *missing = !rt::nvrtc_available(&why);
    throw;
  }
}

std::string DeviceRun::fallback(const ops::Problem& p, const std::vector<cuda::DeviceTensor>& a,
                                CUstream s) {
  return p.op == "gemm" ? gemm_fallback(p, a, s) : attention_fallback(p, a, s);
}

std::string DeviceRun::gemm_fallback(const ops::Problem& p,
                                     const std::vector<cuda::DeviceTensor>& a, CUstream s) {
  if (p.dtype == DType::f32)
    user_error() << "gemm: no GPU fallback runs f32 (cuBLASLt and the GPU reference take bf16 "
                    "or f16); convert the operands or use host tensors";
  const std::string layout = p.options.at("layout");
  const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
  if (!cublaslt_ && cublaslt_missing_.empty()) {
    if (disabled("cuBLASLt")) {
      cublaslt_missing_ = "cuBLASLt is disabled (DispatchOptions::disable_libraries)";
    } else {
      try {
        cublaslt_ = std::make_unique<ops::CublasLtGemm>();
      } catch (const UserError& e) {
        cublaslt_missing_ = e.what();
      }
    }
  }
  if (cublaslt_) {
    cublaslt_->run(p.dtype, layout, M, N, K, a[0].ptr, a[1].ptr, a[2].ptr, s);
    return "cuBLASLt";
  }
  note_("gemm/cuBLASLt", "gemm: cuBLASLt is unavailable (" + cublaslt_missing_ +
                             "); gemm fallbacks run the fp32 GPU reference (slow)");
  CUdeviceptr tmp = scratch(size_t(M * N) * 4);
  ops::gpu_reference_gemm(p.dtype, layout, M, N, K, a[0].ptr, a[1].ptr, tmp, s);
  convert(tmp, a[2].ptr, M * N, p.dtype, s);
  return "fp32 GPU reference";
}

std::string DeviceRun::attention_fallback(const ops::Problem& p,
                                          const std::vector<cuda::DeviceTensor>& a, CUstream s) {
  ops::AttentionDesc d = ops::attention_desc(p);
  ops::AttentionPtrs ptrs{a[0].ptr, a[1].ptr, a[2].ptr, a[3].ptr};
  if (!cudnn_ && cudnn_missing_.empty()) {
    if (disabled("cuDNN")) {
      cudnn_missing_ = "cuDNN is disabled (DispatchOptions::disable_libraries)";
    } else {
      try {
        cudnn_ = std::make_unique<ops::CudnnAttention>();
      } catch (const UserError& e) {
        cudnn_missing_ = e.what();
      }
    }
  }
  std::string why;
  if (cudnn_ && cudnn_->supports(d, &why)) {
    cudnn_->run(d, ptrs, s);
    return "cuDNN SDPA";
  }
  if (!cudnn_)
    note_("attention/cuDNN", "attention: cuDNN is unavailable (" + cudnn_missing_ +
                                 "); attention fallbacks run the unfused GPU reference (slow)");
  else
    note_("attention/cuDNN/" + d.key(),
          "attention: " + why + "; this problem runs the unfused GPU reference (slow)");
  const int64_t n = d.B * d.H * d.S * d.D;
  CUdeviceptr tmp = scratch(size_t(n) * 4);
  ptrs.o = tmp;
  ops::gpu_reference_attention(d, ptrs, s);
  convert(tmp, a[3].ptr, n, p.dtype, s);
  return "unfused GPU reference";
}

void DeviceRun::convert(CUdeviceptr src, CUdeviceptr dst, int64_t n, DType dtype, CUstream s) {
  if (!convert_fn_)
    convert_fn_ = rt::jit_load(std::string("// TilePilot dispatch conversion\n") + kConvert,
                               "tp_f32_to_16", "dispatch tp_f32_to_16", arch_, {})
                      .fn;
  long long count = n;
  int bf16 = dtype == DType::bf16 ? 1 : 0;
  void* args[] = {&src, &dst, &count, &bf16};
  rt::LaunchConfig cfg;
  cfg.grid = {static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 8192)), 1, 1};
  cfg.block = {256, 1, 1};
  cfg.stream = s;
  rt::launch(convert_fn_, cfg, args);
}

CUdeviceptr DeviceRun::scratch(size_t bytes) {
  if (scratch_.bytes() < bytes) {
    // Work already enqueued may still read the old buffer; let it finish before freeing it.
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    scratch_ = rt::DeviceBuffer(bytes);
  }
  return scratch_.ptr();
}

} // namespace tp::dispatch
