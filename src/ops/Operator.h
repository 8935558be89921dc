// The operator library's common interface. An operator (gemm, attention) knows how to parse and
// validate a problem, build its tile-language kernel for a config, make seeded inputs, compute
// an fp64 reference, and say which outputs a block writes (for sampled CPU checks).
#pragma once
#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tilepilot/lang.h"
#include "tilepilot/problem.h"
#include "tilepilot/tensor.h"

namespace tp::ops {

/// A description of a config knob for `tilepilot ops` and the tuner.
struct Knob {
  std::string name;
  std::vector<int64_t> values;
  std::string help;
};

/// A box of an output tensor: per dimension [min, min + extent).
struct Box {
  int tensor; // index into the kernel parameters
  std::vector<int64_t> min, extent;
};

class Operator {
public:
  virtual ~Operator() = default;
  virtual std::string name() const = 0;
  virtual std::string summary() const = 0;
  /// Shape keys with their meaning, e.g. {"M", "rows of A and C"}.
  virtual std::vector<std::pair<std::string, std::string>> shape_keys() const = 0;
  virtual std::vector<Knob> knobs() const = 0;
  /// Builds a validated problem from `key=value` pairs; user error naming the bad key.
  virtual Problem parse(const std::map<std::string, std::string>& kv, DType dtype) const = 0;
  /// The config used when none is given, for `arch` ("cpu", "sm_80", "sm_90a").
  virtual Config default_config(const Problem& p, const std::string& arch) const = 0;
  /// User error when `c` is not valid for `p` (unknown knob, tile not dividing, ...).
  virtual void validate(const Problem& p, const Config& c) const = 0;
  virtual Kernel build(const Problem& p, const Config& c) const = 0;
  /// Kernel arguments in parameter order: inputs random (seeded), outputs poisoned.
  virtual std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) const = 0;
  /// Indices of the arguments that are outputs.
  virtual std::vector<int> outputs(const Problem& p) const = 0;
  /// fp64 reference of output `out` over `box` (row-major within the box).
  virtual std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args,
                                        const Box& box) const = 0;
  /// The output boxes block (x, y, z) writes, and the grid.
  virtual std::vector<Box> block_outputs(const Problem& p, const Config& c,
                                         const std::array<int64_t, 3>& block) const = 0;
  virtual std::array<int64_t, 3> grid(const Problem& p, const Config& c) const = 0;
  virtual double flops(const Problem& p) const = 0;
  /// Bytes the operator must move at least (inputs read once, outputs written once).
  virtual double min_bytes(const Problem& p) const = 0;
  /// Default tolerance for dtype (atol, rtol).
  virtual std::pair<double, double> tolerance(DType t) const;
};

const Operator& find_operator(const std::string& name);
std::vector<const Operator*> all_operators();

/// Parses "k=v,k=v" into pairs; user error on malformed text.
std::map<std::string, std::string> parse_kv(const std::string& text, const char* what);
Config parse_config(const std::string& text);

} // namespace tp::ops
