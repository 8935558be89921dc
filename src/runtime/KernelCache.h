// Content-addressed on-disk cache of compiled kernels. One file per key, written atomically
// (temporary file in the same directory, then rename). Each file carries a checksum; an entry
// that fails any check is removed and reported once, and the caller recompiles it.
#pragma once
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "runtime/Nvrtc.h"

namespace tp::rt {

/// XXH3-128 hex over the canonical kernel text, the arch, the effective NVRTC options, the
/// device library version and the NVRTC version: everything that determines the cubin.
std::string cache_key(const std::string& canonical_ir, const std::string& arch,
                      const std::vector<std::string>& options);
/// cache_key with the two versions explicit (cache_key passes the current ones).
std::string cache_key_for_versions(const std::string& canonical_ir, const std::string& arch,
                                   const std::vector<std::string>& options,
                                   const std::string& device_library, const std::string& nvrtc);

/// $TILEPILOT_CACHE_DIR, else $XDG_CACHE_HOME/tilepilot, else ~/.cache/tilepilot.
std::string default_cache_dir();

class KernelCache {
public:
  /// A cache in `dir` (created on first store). Disabled: lookups miss, stores do nothing.
  explicit KernelCache(std::string dir, bool enabled = true);

  /// The process-wide cache in default_cache_dir(), read once. TILEPILOT_CACHE=off (or 0)
  /// disables it.
  static KernelCache& global();

  std::optional<CompileOutput> lookup(const std::string& key);
  /// Best effort: a cache that cannot be written is reported once and otherwise ignored.
  void store(const std::string& key, const CompileOutput& out);

  std::string dir() const { return dir_; }
  bool enabled() const { return enabled_; }
  std::string entry_path(const std::string& key) const;
  /// Corrupt entries this object found (and removed) so far.
  int corrupt_entries() const { return corrupt_; }

private:
  void warn_once(std::atomic<bool>& flag, const std::string& message);
  std::string dir_;
  bool enabled_;
  std::atomic<int> corrupt_{0};
  std::atomic<bool> warned_corrupt_{false}, warned_write_{false}, swept_{false};
};

} // namespace tp::rt
