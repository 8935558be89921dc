// A kernel compiled for a target arch with NVRTC alone: no driver and no GPU needed (CI, the
// pilot's compile stage off the device, release artifacts). What `tilepilot show --stage
// ptx|resources` prints, as data.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tilepilot/lang.h"

namespace tp::perf {

struct CompileOnly {
  std::string entry, cuda_source, ptx, nvrtc_log, cache_key;
  std::vector<char> cubin;
  double nvrtc_ms = 0; // measured in this call: the cache is bypassed
  /// registers, shared_bytes (dynamic + static), dynamic_shared_bytes, static_shared_bytes,
  /// spill_bytes (stores + loads), spill_store_bytes, spill_load_bytes, stack_bytes, barriers,
  /// block_threads (launched: consumers plus any producer warpgroup), tma; registers is -1 when
  /// ptxas did not report the entry.
  nlohmann::json resources = nlohmann::json::object();
};

/// Lowers `k` for `arch` ("sm_90a", "sm_80") and compiles it. The variant is the one aligned
/// problems launch (TMA where the target has it). User error when NVRTC is missing or rejects
/// the source (with its log).
CompileOnly compile_only(const Kernel& k, const std::string& arch);

} // namespace tp::perf
