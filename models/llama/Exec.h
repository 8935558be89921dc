// Where the model runs: host tensors on the CPU interpreter, or device memory on the GPU. The
// forward pass is written once against this interface; every operator call (GEMM, attention,
// RMSNorm, RoPE, SwiGLU, decode attention) goes through a tp::ops::Dispatcher (pinned kernel or
// fallback), the glue kernels run directly.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilepilot/dispatch.h"
#include "tilepilot/lang.h"
#include "tilepilot/tensor.h"

namespace tp::models {

/// A weight or activation: dtype, shape and where it lives (owned by the Exec that made it).
struct Buf {
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;
  HostTensor* host = nullptr; // host executor
  uint64_t dev = 0;           // device executor (CUdeviceptr)
  int64_t numel() const;
  size_t bytes() const { return static_cast<size_t>(storage_bytes(dtype, numel())); }
  /// The same memory seen with another shape of as many elements ([B, H, D] as [B, H, 1, D]).
  Buf reshaped(std::vector<int64_t> shape) const;
};

/// Time spent per operator label ("gemm.qkv", "attention", "rmsnorm", ...), in ms.
using OpTimes = std::map<std::string, double>;

class Exec {
public:
  virtual ~Exec() = default;
  virtual bool on_device() const = 0;
  virtual Buf alloc(DType t, std::vector<int64_t> shape) = 0;
  /// Deterministic uniform values center + half_width * u, u in [-1, 1), from (seed, index).
  virtual void fill_uniform(Buf& b, uint64_t seed, double center, double half_width) = 0;
  virtual void upload(Buf& b, const HostTensor& h) = 0;
  virtual HostTensor download(const Buf& b) = 0;
  /// A tile-language kernel on `args` in parameter order.
  virtual void run(const Kernel& k, const std::vector<const Buf*>& args) = 0;
  /// Operator `op` through the dispatcher, on `args` in its parameter order (outputs written
  /// in place), with its string options (gemm's layout, attention's causal).
  virtual void dispatch(const std::string& op, const std::vector<Buf>& args,
                        const std::map<std::string, std::string>& options = {}) = 0;
  /// Brackets one operator of the forward pass; a profiling Exec times it.
  virtual void op_begin(const std::string& label) {}
  virtual void op_end(const std::string& label) {}

  void set_dispatcher(ops::Dispatcher* d) { dispatch_ = d; }
  ops::Dispatcher& dispatcher() const;

protected:
  ops::Dispatcher* dispatch_ = nullptr;
};

/// The value fill_uniform stores at `index` (before rounding to the dtype), the same on both
/// executors: splitmix64 of (seed, index) -> 24 random bits -> u in [-1, 1).
double uniform_value(uint64_t seed, uint64_t index, double center, double half_width);

} // namespace tp::models
