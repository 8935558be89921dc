// f32 -> bf16 / f16 on the device, rounding to nearest even as the kernels' stores round: how
// the fp32 stand-ins for framework operators (GPU references) hand their results over in the
// output's dtype.
#pragma once
#include <array>
#include <cuda.h>
#include <string>

#include "tilepilot/dtype.h"

namespace tp::rt {

/// `n` f32 values at `src` into `dst` as `dtype` (bf16, f16; f32 is a copy), on `stream`.
void convert_f32(CUdeviceptr src, CUdeviceptr dst, int64_t n, DType dtype, CUstream stream);

/// The same into a strided view of bf16 / f16 [shape] (strides in elements, outermost first):
/// source element i, in row-major order over `shape`, lands at dst + dot(index, strides).
void convert_f32_to_view(CUdeviceptr src, CUdeviceptr dst, const std::array<int64_t, 4>& shape,
                         const std::array<int64_t, 4>& strides, DType dtype, CUstream stream);

/// NVRTC-compiles the conversion for `arch` without a GPU (CI checks it).
void compile_convert_kernel(const std::string& arch);

} // namespace tp::rt
