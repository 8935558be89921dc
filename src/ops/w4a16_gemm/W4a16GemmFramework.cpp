// The w4a16 framework chain (W4a16GemmFramework.h):
//   dequant_int4  dense[k, n] = dtype((code(W[k / 8, n], k % 8) - 8) * scales[k / group, n])
//                 the weights of an AWQ/GPTQ layer unpacked into a [K, N] temporary
//   cuBLASLt      C = A dense (nn, f32 accumulation), torch.matmul's GEMM
#include "ops/w4a16_gemm/W4a16GemmFramework.h"

#include "ops/reference/EagerChain.h"
#include "ops/reference/GpuReference.h"
#include "ops/vendor/CublasLt.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/DeviceConvert.h"
#include "tilepilot/error.h"

namespace tp::ops::w4a16 {

namespace {

const char* kKernels = R"(
// Word [r, n] of W holds rows 8r..8r+7 of column n, row 8r+i in bits 4i..4i+3.
extern "C" __global__ void dequant_int4(const unsigned* W, const T* scales, T* dense, int N,
                                        int group, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    long long k = i / N, col = i % N;
    int code = (W[(k / 8) * N + col] >> (4 * (k % 8))) & 15;
    dense[i] = st((float)(code - 8) * ld(scales[(k / group) * N + col]));
  }
}
)";

const EagerChain& chain() {
  static const EagerChain c("w4a16_gemm dequantize", "framework w4a16_gemm", "w4a16_dequant",
                            kKernels);
  return c;
}

size_t dense_bytes(const Problem& p) {
  return static_cast<size_t>(dtype_bytes(p.dtype)) * p.at("K") * p.at("N");
}

void check_args(const std::vector<DeviceTensor>& args) {
  if (args.size() != 4)
    user_error() << "w4a16_gemm framework: takes 4 tensors (A, W, scales, C), got " << args.size();
  for (const DeviceTensor& t : args)
    if (!t.contiguous()) user_error() << "w4a16_gemm framework: every tensor must be contiguous";
}

class DequantCublasLt : public Framework {
public:
  explicit DequantCublasLt(const Problem& p) : p_(p), dense_(dense_bytes(p)) {
    chain().fn("dequant_int4", p.dtype); // compile now, not inside a timed run
  }
  std::string name() const override {
    return "dequantize kernel + cuBLASLt " + lt_.library().version_text();
  }
  void run(const std::vector<DeviceTensor>& a, Stream s) override {
    check_args(a);
    CUstream cs = reinterpret_cast<CUstream>(s);
    dequantize(p_, a[1].ptr, a[2].ptr, dense_.ptr(), cs);
    lt_.run(p_.dtype, "nn", p_.at("M"), p_.at("N"), p_.at("K"), a[0].ptr, dense_.ptr(), a[3].ptr,
            cs);
  }

private:
  Problem p_;
  rt::DeviceBuffer dense_;
  CublasLtGemm lt_;
};

class DequantReference : public Framework {
public:
  DequantReference(const Problem& p, std::string why)
      : p_(p), why_(std::move(why)), dense_(dense_bytes(p)),
        c32_(sizeof(float) * p.at("M") * p.at("N")) {
    chain().fn("dequant_int4", p.dtype);
  }
  std::string name() const override { return "dequantize kernel + fp32 GPU reference GEMM"; }
  std::string note() const override { return "fallback: cuBLASLt cannot run here (" + why_ + ")"; }
  void run(const std::vector<DeviceTensor>& a, Stream s) override {
    check_args(a);
    CUstream cs = reinterpret_cast<CUstream>(s);
    const int64_t M = p_.at("M"), N = p_.at("N"), K = p_.at("K");
    dequantize(p_, a[1].ptr, a[2].ptr, dense_.ptr(), cs);
    gpu_reference_gemm(p_.dtype, "nn", M, N, K, a[0].ptr, dense_.ptr(), c32_.ptr(), cs);
    rt::convert_f32(c32_.ptr(), a[3].ptr, M * N, p_.dtype, cs);
  }

private:
  Problem p_;
  std::string why_;
  rt::DeviceBuffer dense_, c32_;
};

} // namespace

void dequantize(const Problem& p, CUdeviceptr words, CUdeviceptr scales, CUdeviceptr dense,
                CUstream stream) {
  int N = static_cast<int>(p.at("N")), group = static_cast<int>(p.at("group"));
  long long n = p.at("K") * p.at("N");
  void* args[] = {&words, &scales, &dense, &N, &group, &n};
  rt::launch(chain().fn("dequant_int4", p.dtype), eager_launch(n, Stream(stream)), args);
}

std::unique_ptr<Framework> make_framework(const Problem& p, const FrameworkOptions& o) {
  std::string why;
  if (!gpu_available(&why)) user_error() << "w4a16_gemm framework: no GPU to run on: " << why;
  if (o.disabled_libraries.count("cuBLASLt"))
    why = "cuBLASLt is disabled (DispatchOptions::disable_libraries)";
  else if (!o.allow_vendor)
    why = "the caller asked for the stand-in";
  else if (cublaslt_available(&why))
    return std::make_unique<DequantCublasLt>(p);
  if (o.note)
    o.note("w4a16_gemm/cuBLASLt", "w4a16_gemm: cuBLASLt is unavailable (" + why +
                                      "); its fallback runs the fp32 GPU reference GEMM (slow)");
  return std::make_unique<DequantReference>(p, why);
}

std::vector<std::string> compile_framework(const std::string& arch) {
  std::vector<std::string> done;
  for (DType t : {DType::bf16, DType::f16}) {
    chain().compile_only(t, arch);
    done.push_back(std::string("dequant_int4 ") + dtype_name(t));
  }
  return done;
}

} // namespace tp::ops::w4a16
