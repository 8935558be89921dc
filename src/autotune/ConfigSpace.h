// Config spaces: the cartesian product of an operator's knobs, narrowed per target arch, pruned
// before compiling by resource estimates (shared memory, accumulator registers, divisibility,
// the operator's own validate()), and ordered by a shape-aware heuristic so the likely winners
// are compiled and measured first. Every pruned config keeps the reason it was dropped.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ops/Operator.h"
#include "runtime/ResourceUsage.h"
#include "tilepilot/runtime.h"

namespace tp::autotune {

/// What the estimates are checked against.
struct TargetLimits {
  std::string arch;           // "sm_90a" | "sm_80"
  int64_t max_smem_bytes = 0; // per block, after opt-in
  int sm_count = 0;           // for the wave-quantization heuristic
  /// The documented values of the arch's flagship part (H100/H200: 227 KB, 132 SMs; A100:
  /// 163 KB, 108 SMs). User error for any other arch.
  static TargetLimits for_arch(const std::string& arch);
  /// The device's own numbers (falls back to for_arch where the driver did not say).
  static TargetLimits for_device(const rt::DeviceInfo& d);
};

/// One config with its pre-compile estimates.
struct Candidate {
  ops::Config config;
  int64_t smem_bytes = 0; // estimated dynamic shared memory
  int64_t acc_regs = 0;   // estimated accumulator registers per thread (fp32 values)
  double score = 0;       // heuristic, higher is tried first
  std::string reason;     // why it was pruned; "" when kept
  std::string category;   // "smem" | "regs" | "divisibility" | "invalid"; "" when kept
};

struct ConfigSpace {
  std::vector<Candidate> kept;   // best-first by the heuristic; the default config first
  std::vector<Candidate> pruned; // in enumeration order
  std::map<std::string, int64_t> neutral; // each knob's neutral value (see ops::Knob)
  int64_t total() const { return static_cast<int64_t>(kept.size() + pruned.size()); }
  /// Pruned counts per category.
  std::map<std::string, int64_t> pruned_by_category() const;
};

/// The knobs the tuner searches for `op` on `arch`: the operator's own, each with the values it
/// searches there.
std::vector<ops::Knob> knob_space(const ops::Operator& op, const std::string& arch);

/// Replaces knob values from "bm=64|128,stages=3|4" (the CLI's --space). User error naming the
/// knob when it is unknown, a value is not a non-negative integer or is given twice.
std::vector<ops::Knob> restrict_space(std::vector<ops::Knob> space, const std::string& text);

/// The most configs enumerate() takes (the built-in operators' spaces have a few thousand).
inline constexpr size_t kMaxSpaceConfigs = 100000;

/// User error for a knob without values or a product of more than kMaxSpaceConfigs configs.
void check_space_size(const std::vector<ops::Knob>& knobs);

/// Enumerates the product of `knobs`, estimates each config for `p` and `t`, and splits it
/// into kept (ordered) and pruned (with reasons); check_space_size() first.
ConfigSpace enumerate(const ops::Operator& op, const ops::Problem& p, const TargetLimits& t,
                      const std::vector<ops::Knob>& knobs);

/// Estimates and rule checks for one config; fills smem_bytes, acc_regs and, when the config
/// must be pruned, reason and category.
Candidate estimate(const ops::Operator& op, const ops::Problem& p, const TargetLimits& t,
                   const ops::Config& c);

/// Whether `c` is the operator's default config `dflt`; a knob the default leaves out counts
/// as its neutral value (swizzle 0, cluster 1), from ConfigSpace::neutral.
bool is_default_config(const ops::Config& c, const ops::Config& dflt,
                       const std::map<std::string, int64_t>& neutral);

/// Post-compile pruning from the ptxas report: "" when the kernel may be measured, else why
/// not (any spill).
std::string post_compile_reject(const rt::ResourceUsage& usage);

} // namespace tp::autotune
