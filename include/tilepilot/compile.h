// Compiling a kernel for a GPU and launching it: the path the built-in operators take, open to
// any kernel. compile() lowers through the pass list, emits CUDA C++ and compiles it with NVRTC
// into the content-addressed cache (the same JIT and cache as the operators). Lowering and
// NVRTC need no GPU, so source(), ptx() and resources() work on any machine.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tilepilot/device.h"
#include "tilepilot/lang.h"

namespace tp {

/// One launch argument: a device tensor for a Tensor parameter, or a number for a Scalar one.
class Arg {
public:
  Arg(const DeviceTensor& t) : tensor_(t) {}
  Arg(const DeviceArray& a) : tensor_(a.tensor()) {}
  template <std::integral T>
  Arg(T v) : scalar_(true), int_(static_cast<int64_t>(v)), float_(static_cast<double>(v)) {}
  template <std::floating_point T>
  Arg(T v) : scalar_(true), is_float_(true), int_(static_cast<int64_t>(v)), float_(v) {}
  bool is_scalar() const { return scalar_; }
  bool is_float() const { return is_float_; }
  const DeviceTensor& tensor() const { return tensor_; }
  int64_t as_int() const { return int_; }
  double as_double() const { return float_; }

private:
  DeviceTensor tensor_;
  bool scalar_ = false, is_float_ = false;
  int64_t int_ = 0;
  double float_ = 0;
};

struct CompileOptions {
  std::string arch;          // "sm_90a", "sm_80"; empty = the current GPU's
  bool bypass_cache = false; // always run NVRTC (cold-compile measurement); nothing is stored
};

/// What ptxas reported for the compiled entry.
struct Resources {
  int threads = 0;          // per block, every warp role included
  int registers = -1;       // per thread; -1 when ptxas did not say
  int spill_bytes = 0;      // spill stores + loads
  int64_t smem_dynamic = 0; // bytes of dynamic shared memory per block
  int smem_static = 0;
  bool wgmma_serialized = false;
};

/// Phases of getting a kernel ready, in seconds (one variant).
struct CompileTimes {
  double passes = 0, nvrtc = 0, module_load = 0, lookup = 0;
  bool cache_hit = false;
  double total() const { return passes + nvrtc + module_load + lookup; }
};

/// A kernel compiled for one arch. Kernels whose copies TMA can take have two variants: with
/// TMA (for tensors with 16-byte aligned rows) and without; launch() picks per call. Products
/// are built on first use and kept. Copies share one compiled state.
class CompiledKernel {
public:
  CompiledKernel() = default;
  const Kernel& kernel() const;
  const std::string& arch() const;
  /// The generated CUDA C++, the lowered IR with layouts and the pipeline plan, the PTX.
  std::string source(bool tma = true) const;
  std::string lowered(bool tma = true) const;
  std::string ptx(bool tma = true) const;
  Resources resources(bool tma = true) const;
  /// The kernel's schedule annotations and launch shape, as key -> value.
  std::map<std::string, std::string> config() const;
  /// Checks every argument (count, kind, dtype, rank, sizes against the Dims, alignment and the
  /// strides TMA needs), binds the Dims from the shapes and launches on `stream`. Asynchronous.
  void launch(const std::vector<Arg>& args, Stream stream = nullptr) const;
  /// Compiles and loads the variant `args` need without launching.
  CompileTimes prepare(const std::vector<Arg>& args) const;

  struct State;

private:
  friend CompiledKernel compile(const Kernel&, const CompileOptions&);
  std::shared_ptr<State> state_;
};

/// Prepares `k` for `opts.arch`. Lowering errors (a kernel the target cannot run) are thrown
/// here; NVRTC runs on first use (ptx(), resources(), prepare() or launch()).
CompiledKernel compile(const Kernel& k, const CompileOptions& opts = {});

} // namespace tp
