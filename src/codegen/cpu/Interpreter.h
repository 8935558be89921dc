// The CPU reference interpreter: runs a kernel's tile-level IR for a whole grid (or chosen
// blocks) on host tensors. Deterministic; stores round like the GPU (f16/bf16 round to nearest
// even); gemm accumulates each call's products in double and adds them into the f32
// accumulator once. Tiles start out poisoned (NaN), so reading before writing shows up.
#pragma once
#include <array>
#include <ostream>
#include <vector>

#include "tilepilot/lang.h"
#include "tilepilot/tensor.h"

namespace tp::cpu {

struct InterpretOptions {
  std::vector<std::array<int64_t, 3>> blocks; // run only these (x, y, z); empty = whole grid
  int threads = 0;                            // worker threads over blocks; 0 = all cores
  std::ostream* print_out = nullptr;          // where print() writes; default std::cout
};

/// Runs `k` with `args` in parameter order. Outputs are written in place.
void interpret(const Kernel& k, const std::vector<HostTensor*>& args,
               const InterpretOptions& opts = {});

/// One argument in launch order: a tensor (whole, or a strided view of it: element idx of the
/// view is element offset + sum(idx[d] * strides[d]) of the tensor's flat storage) or the value
/// of a scalar parameter.
struct Arg {
  HostTensor* tensor = nullptr; // null: a scalar
  bool view = false;
  int64_t offset = 0;
  std::vector<int64_t> shape, strides;
  double scalar = 0;
};

/// The same for kernels with scalar parameters or strided tensors (named apart so that
/// `interpret(k, {&a, &b})` stays unambiguous). A view is read into the
/// interpreter's own storage before the blocks run and its elements are written back after (only
/// for tensors the kernel writes), so views of one tensor that a kernel both writes and reads
/// must not overlap.
void interpret_args(const Kernel& k, const std::vector<Arg>& args,
                    const InterpretOptions& opts = {});

/// The grid `k` launches for these arguments' shapes.
std::array<int64_t, 3> grid_extent(const Kernel& k, const std::vector<HostTensor*>& args);

} // namespace tp::cpu
