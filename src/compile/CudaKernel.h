// A tile-language kernel compiled for the current GPU and launchable on device tensors.
// Construction lowers and compiles both variants lazily: the TMA variant for problems whose
// TMA-loaded tensors have 16-byte aligned rows, and a variant without TMA for the rest.
#pragma once
#include <array>
#include <cuda.h>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/cuda/LoweredKernel.h"
#include "ir/ArgBinding.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/Jit.h"
#include "tilepilot/device.h"

namespace tp::cuda {

/// A device tensor argument (tilepilot/device.h): memory, dtype, shape and strides (elements,
/// outermost first; empty = row-major contiguous, the only kind a parameter not declared
/// strided takes). One type from the public API down to the launch.
using DeviceTensor = tp::DeviceTensor;

/// Phases of getting a kernel ready to launch, in seconds.
struct CompileTimings {
  double passes = 0;      // lowering passes + CUDA emission
  double nvrtc = 0;       // NVRTC in this call (0 on a cache hit)
  double module_load = 0; // cuModuleLoadData + cuModuleGetFunction
  double lookup = 0;      // cache lookups
  bool cache_hit = false;
  int registers = -1; // per thread, from ptxas' report (-1: the log did not say)
  double total() const { return passes + nvrtc + module_load + lookup; }
};

class CudaKernel {
public:
  /// `arch` is the device's ("sm_90a"); `bypass_cache` forces NVRTC (cold-compile measurement).
  CudaKernel(Kernel k, std::string arch, bool bypass_cache = false);

  /// Checks the arguments (dtype, shape, Dim bindings, alignment, 32-bit indexing), picks the
  /// variant, encodes tensor maps and launches on `stream`.
  void launch(const std::vector<DeviceTensor>& args, CUstream stream = nullptr);
  /// The same for kernels with scalar parameters: `tensors` in params order, `scalars` in
  /// k.scalars order (passed by value, f32 rounded, i32 must be integers).
  void launch(const std::vector<DeviceTensor>& tensors, const std::vector<double>& scalars,
              CUstream stream = nullptr);
  /// Compiles (and loads) the variant `args` need without launching; returns its timings.
  const CompileTimings& prepare(const std::vector<DeviceTensor>& args);
  /// The variant for contiguous arguments (strided parameters' included): with TMA or not.
  const LoweredKernel& lowered(bool tma = true);
  const Kernel& kernel() const { return kernel_; }
  /// Whether a launch whose dtypes, shapes, strides and scalars repeat the last launch's reuses
  /// what was derived from them (on by default; off only to measure what it saves).
  void reuse_bindings(bool on) { bound_.reuse = on; }

private:
  struct Variant {
    std::unique_ptr<LoweredKernel> lowered;
    rt::JitKernel jit;
    CompileTimings timings;
    bool ready = false;
    unsigned persistent_grid_cap = 0; // persistent kernels: SMs x blocks that fit on one SM
    /// The last launch's tensor maps and the tensors they describe (reused while unchanged).
    std::vector<CUtensorMap> maps;
    std::vector<DeviceTensor> map_args;
  };
  /// The TMA variant takes the launch when every TMA-loaded tensor has a 16-byte aligned
  /// address and row pitch (strided: unit innermost stride and outer strides 16-byte multiples).
  bool wants_tma(const std::vector<DeviceTensor>& args);
  /// Bit i: strided parameter i gets a non-contiguous view in this launch (passes::Target::
  /// view_params); the others are indexed as contiguous in the variant the launch takes. A
  /// kernel with more than 64 parameters indexes those past 64 as views always.
  uint64_t view_params(const std::vector<DeviceTensor>& args) const;
  /// The paired-store parameters whose rows are even by their shapes and strides
  /// (even_row_params), computed once per binding.
  uint64_t even_shapes(const std::vector<ir::ArgDesc>& desc);
  /// Of those (`even_shapes`), the ones whose first element is aligned to two elements in this
  /// launch (passes::Target::even_rows): a kernel called with even and odd row lengths compiles
  /// both variants.
  static uint64_t even_rows(const std::vector<DeviceTensor>& args, uint64_t even_shapes);
  /// The TMA-store candidates (LoweredKernel::tma_store_candidates) whose tensors TMA can
  /// write in this launch: 16-byte aligned base and row pitch (passes::Target::tma_store_params;
  /// the other bits set, as the default). A launch without TMA keeps every bit set.
  uint64_t tma_stores(const std::vector<DeviceTensor>& args);
  /// What picks a variant: TMA or not, view_params, even_rows, tma_store_params.
  using VariantKey = std::tuple<bool, uint64_t, uint64_t, uint64_t>;
  Variant& variant(const VariantKey& key);
  const LoweredKernel& lowered(const VariantKey& key);

  /// What the last launch derived from its arguments' dtypes, shapes and strides and from its
  /// scalars alone (not addresses): checked by bind_args and the 32-bit and grid checks.
  struct Bound {
    bool reuse = true, valid = false;
    std::vector<ir::ArgDesc> desc;
    std::vector<double> scalars;
    std::array<unsigned, 3> grid{1, 1, 1};
    std::vector<int> dims, strides; // the Dim values and the strided parameters' strides
    uint64_t even_shapes = 0;       // even_shapes(desc)
    bool same(const std::vector<DeviceTensor>& args, const std::vector<double>& scalars) const;
  };
  /// Binds and checks `args` and `scalars` into bound_ (every check that needs no address).
  void bind(const std::vector<DeviceTensor>& args, const std::vector<double>& scalars);

  Bound bound_;
  Kernel kernel_;
  std::string arch_;
  bool bypass_cache_;
  /// By VariantKey: a kernel called with views and with contiguous tensors compiles both.
  std::map<VariantKey, Variant> variants_;
  /// Persistent kernels' tile counters, one per stream so that launches on different streams
  /// never share one (launches on one stream run in order, and each leaves its counter zero).
  std::map<CUstream, rt::DeviceBuffer> sched_;
};

} // namespace tp::cuda
