// grouped_gemm's framework operator: what a PyTorch MoE layer without a grouped kernel runs
// (Mixtral's HF block): the per-expert row counts read back to the host (.tolist()), then one
// cuBLASLt GEMM per non-empty expert on its slice of A and C. Where cuBLASLt cannot run, the
// fp32 GPU reference stands in per expert, rounded into C's dtype, and its note says so.
#include <algorithm>

#include "ops/grouped_gemm/GroupedGemm.h"
#include "ops/reference/GpuReference.h"
#include "ops/vendor/CublasLt.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/DeviceConvert.h"
#include "runtime/Driver.h"
#include "tilepilot/error.h"

namespace tp::ops::grouped_gemm {

namespace {

/// One expert's GEMM: rows [row0, row0 + rows) of A and C against B[expert].
struct Slice {
  int64_t expert, row0, rows;
};

/// The non-empty experts' slices, offs read back to the host (a synchronisation, as .tolist()).
std::vector<Slice> read_slices(const Problem& p, const std::vector<DeviceTensor>& args,
                               CUstream s) {
  if (args.size() != 4)
    user_error() << "grouped_gemm framework: takes 4 tensors (A, B, offs, C), got " << args.size();
  for (const DeviceTensor& t : args)
    if (!t.contiguous()) user_error() << "grouped_gemm framework: every tensor must be contiguous";
  const int64_t E = p.at("E");
  HostTensor offs(DType::i32, {E});
  TILEPILOT_CU(rt::driver().cuMemcpyDtoHAsync(offs.data(), args[2].ptr, size_t(E) * 4, s));
  TILEPILOT_CU(rt::driver().cuStreamSynchronize(s));
  std::vector<Slice> out;
  int64_t begin = 0;
  const std::vector<int64_t> ends = offsets_of(offs, p.at("R"));
  for (int64_t e = 0; e < E; ++e) {
    if (ends[e] > begin) out.push_back({e, begin, ends[e] - begin});
    begin = ends[e];
  }
  return out;
}

/// The fp32 GPU reference GEMM of each slice into f32 C at `c32`.
void reference_slices(const Problem& p, const std::vector<DeviceTensor>& a, CUdeviceptr c32,
                      const std::vector<Slice>& slices, CUstream s);

/// Bytes to the start of row `row` of an expert's operand.
CUdeviceptr at(const DeviceTensor& t, int64_t elements) {
  return t.ptr + static_cast<uint64_t>(elements * dtype_bytes(t.dtype));
}

class CublasLtPerExpert : public Framework {
public:
  explicit CublasLtPerExpert(const Problem& p) : p_(p) {}
  std::string name() const override {
    return std::string(kFrameworkName) + " (cuBLASLt " + lt_.library().version_text() + ")";
  }
  void run(const std::vector<DeviceTensor>& a, Stream stream) override {
    CUstream s = reinterpret_cast<CUstream>(stream);
    const int64_t N = p_.at("N"), K = p_.at("K");
    const std::string& layout = p_.options.at("layout");
    for (const Slice& x : read_slices(p_, a, s))
      lt_.run(p_.dtype, layout, x.rows, N, K, at(a[0], x.row0 * K), at(a[1], x.expert * N * K),
              at(a[3], x.row0 * N), s);
  }

private:
  Problem p_;
  mutable CublasLtGemm lt_;
};

class ReferencePerExpert : public Framework {
public:
  ReferencePerExpert(const Problem& p, std::string why)
      : p_(p), why_(std::move(why)), c32_(size_t(p.at("R") * p.at("N")) * sizeof(float)) {}
  std::string name() const override { return "fp32 GPU reference, one GEMM per expert"; }
  std::string note() const override { return "fallback: cuBLASLt cannot run here (" + why_ + ")"; }
  void run(const std::vector<DeviceTensor>& a, Stream stream) override {
    CUstream s = reinterpret_cast<CUstream>(stream);
    const std::vector<Slice> x = read_slices(p_, a, s);
    reference_slices(p_, a, c32_.ptr(), x, s);
    // Rows [0, offs[E - 1]) are the experts'; those past it stay unwritten, as in the kernel.
    if (x.empty()) return;
    const int64_t rows = x.back().row0 + x.back().rows, N = p_.at("N");
    rt::convert_f32(c32_.ptr(), a[3].ptr, rows * N, p_.dtype, s);
  }

private:
  Problem p_;
  std::string why_;
  rt::DeviceBuffer c32_;
};

} // namespace

namespace {

void reference_slices(const Problem& p, const std::vector<DeviceTensor>& a, CUdeviceptr c32,
                      const std::vector<Slice>& slices, CUstream s) {
  const int64_t N = p.at("N"), K = p.at("K");
  for (const Slice& x : slices)
    gpu_reference_gemm(p.dtype, p.options.at("layout"), x.rows, N, K, at(a[0], x.row0 * K),
                       at(a[1], x.expert * N * K), c32 + uint64_t(x.row0 * N) * sizeof(float), s);
}

} // namespace

void gpu_reference(const Problem& p, const std::vector<DeviceTensor>& a,
                   const DeviceTensor& out_f32, Stream stream) {
  CUstream s = reinterpret_cast<CUstream>(stream);
  reference_slices(p, a, out_f32.ptr, read_slices(p, a, s), s);
}

std::unique_ptr<Framework> make_framework(const Problem& p, const FrameworkOptions& o) {
  std::string why;
  if (o.disabled_libraries.count("cuBLASLt"))
    why = "cuBLASLt is disabled (DispatchOptions::disable_libraries)";
  else if (!o.allow_vendor)
    why = "the caller asked for the stand-in";
  else if (cublaslt_available(&why))
    return std::make_unique<CublasLtPerExpert>(p);
  if (!gpu_available()) user_error() << "grouped_gemm framework: no GPU to run on: " << why;
  if (o.note)
    o.note("grouped_gemm/cuBLASLt", "grouped_gemm: cuBLASLt is unavailable (" + why +
                                        "); grouped_gemm fallbacks run the fp32 GPU reference "
                                        "per expert (slow)");
  return std::make_unique<ReferencePerExpert>(p, why);
}

} // namespace tp::ops::grouped_gemm
