// Per-kernel resource usage parsed from ptxas verbose output (-Xptxas=-v), which NVRTC writes
// into the program log. nvrtc_compile always asks for it.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tp::rt {

struct ResourceUsage {
  int registers = -1; // -1: no "Used N registers" line was found for the entry
  int barriers = 0;
  int spill_store_bytes = 0, spill_load_bytes = 0, stack_bytes = 0, shared_static_bytes = 0;
  /// ptxas serialized the entry's wgmma instructions (a "Potential Performance Loss": C7515,
  /// non-wgmma instructions define accumulator registers while a wgmma group is in flight, or
  /// C7512, too few registers).
  bool wgmma_serialized = false;
  /// wgmma fences ptxas added itself (C7519: "warpgroup.arrive is injected … to allow use of
  /// registers in GMMA"): each is a point where the warpgroup waits for its wgmma.
  int wgmma_fences_injected = 0;
  std::string raw; // the ptxas lines this was parsed from
};

/// Every entry function in `log`, in log order, keyed by its (possibly mangled) name.
std::vector<std::pair<std::string, ResourceUsage>> parse_resource_usage(const std::string& log);

/// The usage of `entry`, or of the first entry when `entry` is empty; registers = -1 when the
/// log does not mention it.
ResourceUsage resource_usage(const std::string& log, const std::string& entry = "");

} // namespace tp::rt
