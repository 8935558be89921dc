// How a config is chosen at run time, the two options of the seed's decision guide:
//  - pinned: a fixed table shipped with a release. Exact-key lookup, else the operator's default
//    config. Never tunes, never reads the tuning database: predictable and auditable. Releases
//    use this.
//  - adaptive: the tuning database first; on a miss, tune through the hooks, store the winner
//    and use it. Every choice is appended to a telemetry file (JSON lines) with its timings, so
//    an adaptive choice can be explained afterwards.
#pragma once
#include <optional>
#include <string>

#include "autotune/Hooks.h"
#include "autotune/TuneKey.h"
#include "autotune/Tuner.h"
#include "autotune/TuningDb.h"

namespace tp::autotune {

enum class PolicyKind { pinned, adaptive };
const char* policy_name(PolicyKind k);

/// A release's pinned configs, by exact key.
class PinnedTable {
public:
  /// A JSON file {"format": 1, "entries": [{"key": {...}, "config": {...}}, ...]}, or a
  /// directory holding pinned_configs.json in that form, or else tuning-database entries
  /// (*.json). A pinned table is a release artifact, so anything malformed is a user error
  /// naming the file (it must not silently fall back).
  static PinnedTable load(const std::string& path);
  void add(const TuneKey& key, ops::Config config); // replaces an entry with the same key
  const ops::Config* find(const TuneKey& key) const;
  size_t size() const { return entries_.size(); }
  nlohmann::json to_json() const;

private:
  std::map<std::string, std::pair<TuneKey, ops::Config>> entries_; // by canonical key
};

/// The tuning-database entry for a search that found a winner: its config and median, the
/// median of `dflt` on the same run (-1 when not measured), who wrote it, wall time and counts.
DbEntry winner_entry(const TuneKey& key, const TuneResult& r, const ops::Config& dflt,
                     const std::string& source);

struct Policy {
  PolicyKind kind = PolicyKind::pinned;
  PinnedTable pinned;             // pinned
  std::string db_dir;             // adaptive; "": TuningDb::default_dir()
  std::string telemetry_path;     // adaptive; "": <db_dir>/telemetry.jsonl
  std::optional<TuneHooks> hooks; // adaptive; nullopt: default_hooks(op, problem, arch)
  TuneOptions tune;               // adaptive
};

struct Choice {
  ops::Config config;
  std::string source; // "pinned" | "db" | "tuned" | "default"
  std::string reason; // why this source, in words
};

/// The config to run `problem` with on `device` under `policy`. Never throws for a missing
/// entry, missing hooks or a failed search: those choose the default config and say why. A
/// search that finds no correct candidate stores nothing, so the next use searches again;
/// callers dispatching often should keep the Choice per key.
Choice choose_config(const Policy& policy, const ops::Operator& op, const ops::Problem& problem,
                     const rt::DeviceInfo& device);

} // namespace tp::autotune
