// The output boxes a block writes, read from the built kernel instead of written a second time
// by the operator: Operator::block_outputs's default. The kernel's statements are walked with
// the block's indices and the Dims bound; loops whose bodies write an output are unrolled and
// element-wise loops enumerated, so that every write's position is a number. A write whose
// position depends on what the walk cannot know (a loaded value, a loop too long to unroll)
// makes the answer "not derivable", and the operator must then say it itself.
#pragma once
#include <array>
#include <optional>
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops {

/// The boxes of the tensors in `outputs` (parameter indices) that block `block` of `k` writes,
/// with the kernel's parameters shaped as `specs`; nullopt when a write's position cannot be
/// evaluated, or the elements a block stores element by element do not fill a box.
std::optional<std::vector<Box>> output_boxes(const Kernel& k, const std::vector<ArgSpec>& specs,
                                             const std::vector<int>& outputs,
                                             const std::array<int64_t, 3>& block);

} // namespace tp::ops
