// The CPU reference interpreter, with the same call shape as a launch: it runs every block of
// the grid on host tensors and writes the outputs in place. It implements the one semantics of
// the language (docs/semantics.md); a kernel's GPU results are checked against it.
#pragma once
#include <cstdint>
#include <ostream>
#include <vector>

#include "tilepilot/lang.h"
#include "tilepilot/tensor.h"

namespace tp {

/// A strided view of a host tensor, what a DeviceTensor with strides is on the GPU: element
/// idx of the view is element `offset + sum(idx[d] * strides[d])` of `base`'s row-major storage
/// (strides in elements, outermost first). Pass it for a parameter declared `tp::strided`, e.g.
/// rows 16..47 of a [64, 128] tensor: `HostView{&t, 16 * 128, {32, 128}, {128, 1}}`, or its
/// transpose: `HostView{&t, 0, {128, 64}, {1, 128}}`. The interpreter reads the view's elements
/// before the kernel runs and writes back those of views the kernel writes, so two views of one
/// tensor that a kernel writes and reads must not overlap.
struct HostView {
  HostTensor* base = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> shape, strides;
};

/// One interpreter argument: a host tensor (or a view of one) for a Tensor parameter, or a
/// number for a Scalar.
class HostArg {
public:
  HostArg(HostTensor* t) : tensor_(t) {}
  HostArg(HostTensor& t) : tensor_(&t) {}
  HostArg(const HostView& v) : tensor_(v.base), view_(v), is_view_(true) {}
  template <std::integral T>
  HostArg(T v) : int_(static_cast<int64_t>(v)), float_(static_cast<double>(v)) {}
  template <std::floating_point T>
  HostArg(T v) : is_float_(true), int_(static_cast<int64_t>(v)), float_(v) {}
  bool is_scalar() const { return tensor_ == nullptr; }
  bool is_float() const { return is_float_; }
  HostTensor* tensor() const { return tensor_; }
  bool is_view() const { return is_view_; }
  const HostView& view() const { return view_; }
  int64_t as_int() const { return int_; }
  double as_double() const { return float_; }

private:
  HostTensor* tensor_ = nullptr;
  HostView view_;
  bool is_view_ = false;
  bool is_float_ = false;
  int64_t int_ = 0;
  double float_ = 0;
};

struct InterpretOptions {
  int threads = 0;                   // worker threads over blocks; 0 = all cores
  std::ostream* print_out = nullptr; // where print() writes; default std::cout
};

/// Runs `k` on the CPU with `args` in parameter order (tensors and scalars as the kernel lists
/// them). A scalar's number must suit its dtype (an integer for i32).
void interpret(const Kernel& k, const std::vector<HostArg>& args, const InterpretOptions& o = {});

/// The IR of a kernel as text (what `tilepilot show --stage ir` prints).
std::string to_string(const Kernel& k);

} // namespace tp
