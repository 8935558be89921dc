// The framework operators of the element-wise and row-wise operators: chains of plain CUDA C++
// kernels that launch what eager PyTorch launches, with its roundings. One module per operator
// and dtype, compiled by NVRTC at first use; the kernels read and write the element type `T`
// through ld() / st(), computing in f32 and storing with round-to-nearest-even.
#pragma once
#include <cuda.h>
#include <string>

#include "runtime/Launch.h"
#include "tilepilot/device.h"
#include "tilepilot/dtype.h"

namespace tp::ops {

class EagerChain {
public:
  /// `banner` names the module in its source, `cache_name` is its kernel-cache identity (with
  /// the dtype appended), `program` names it in NVRTC errors; `kernels` is the CUDA source.
  EagerChain(std::string banner, std::string cache_name, std::string program, const char* kernels);
  /// The CUDA source for `t`: the ld / st prelude for the dtype, then the kernels.
  std::string source(DType t) const;
  /// `entry` for the current device and `t`, compiled and loaded once (thread-safe).
  CUfunction fn(const char* entry, DType t) const;
  /// Compiles the module for `t` and `arch` without a GPU (CI).
  void compile_only(DType t, const std::string& arch) const;

private:
  std::string banner_, cache_name_, program_;
  const char* kernels_;
};

/// An element-wise launch: 256 threads, a grid-stride loop over 1 to 2^16 blocks.
rt::LaunchConfig eager_launch(int64_t n, Stream s);

} // namespace tp::ops
