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

/// One interpreter argument: a host tensor for a Tensor parameter, or a number for a Scalar.
class HostArg {
public:
  HostArg(HostTensor* t) : tensor_(t) {}
  HostArg(HostTensor& t) : tensor_(&t) {}
  template <std::integral T>
  HostArg(T v) : int_(static_cast<int64_t>(v)), float_(static_cast<double>(v)) {}
  template <std::floating_point T>
  HostArg(T v) : is_float_(true), int_(static_cast<int64_t>(v)), float_(v) {}
  bool is_scalar() const { return tensor_ == nullptr; }
  bool is_float() const { return is_float_; }
  HostTensor* tensor() const { return tensor_; }
  int64_t as_int() const { return int_; }
  double as_double() const { return float_; }

private:
  HostTensor* tensor_ = nullptr;
  bool is_float_ = false;
  int64_t int_ = 0;
  double float_ = 0;
};

struct InterpretOptions {
  int threads = 0;                   // worker threads over blocks; 0 = all cores
  std::ostream* print_out = nullptr; // where print() writes; default std::cout
};

/// Runs `k` on the CPU with `args` in parameter order.
void interpret(const Kernel& k, const std::vector<HostArg>& args, const InterpretOptions& o = {});

/// The IR of a kernel as text (what `tilepilot show --stage ir` prints).
std::string to_string(const Kernel& k);

} // namespace tp
