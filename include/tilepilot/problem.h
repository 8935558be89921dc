// An operator problem as dispatch, the pilot and the model paths name it: the operator, its
// shape keys, dtype and string options; and a config of integer knobs for its kernel.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "tilepilot/dtype.h"

namespace tp::ops {

/// Integer tuning knobs: tile sizes, stages, threads, ...
using Config = std::map<std::string, int64_t>;

/// One problem instance: shape keys (M, N, K or B, H, S, D, ...), dtype and string options
/// (gemm layout, attention per-batch key lengths).
struct Problem {
  std::string op;
  std::map<std::string, int64_t> shape;
  DType dtype = DType::bf16;
  std::map<std::string, std::string> options;

  int64_t at(const std::string& k) const;
  int64_t get(const std::string& k, int64_t dflt) const;
  /// "M=77,N=45,K=133" (shape keys, then options), stable order.
  std::string shape_str() const;
};

/// Parses and validates a problem of operator `op` from its keys as text ({"M", "77"},
/// {"layout", "nt"}); a UserError names the key and the rule.
Problem parse_problem(const std::string& op, const std::map<std::string, std::string>& kv,
                      DType dtype);
/// "bm=128,bn=256,..." in a stable order.
std::string config_str(const Config& c);

} // namespace tp::ops
