// The tuning database: one JSON file per key in a directory ($TILEPILOT_TUNE_DB, else
// ~/.cache/tilepilot/tune). Safe under concurrent processes: a file is replaced atomically
// (write a temp file, fsync, rename), so readers see the old or the new entry, never half of
// one; writers serialize read-modify-write on a per-key advisory lock (flock on <stem>.lock).
// A corrupt, truncated or foreign entry is ignored and reported once per process; the next
// write for its key replaces it. An entry is returned only when its stored key equals the
// requested key exactly.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "autotune/TuneKey.h"
#include "ops/Operator.h"

namespace tp::autotune {

struct DbEntry {
  TuneKey key;
  ops::Config config;
  double ms_median = -1;         // the config's measured median; -1 unknown
  double default_ms_median = -1; // the operator's default config on the same run; -1 unknown
  std::string source;            // who wrote it: "tilepilot tune", "adaptive", ...
  std::string written_at;        // UTC, ISO 8601; filled by put() when empty
  nlohmann::json extra = nlohmann::json::object(); // candidate counts, wall time, ...

  nlohmann::json to_json() const;
  static std::optional<DbEntry> from_json(const nlohmann::json& j, std::string* why);
};

class TuningDb {
public:
  /// Receives each "ignoring <file>: <why>" message (once per file per process).
  using Reporter = std::function<void(const std::string& message)>;

  /// $TILEPILOT_TUNE_DB, else $HOME/.cache/tilepilot/tune; user error when neither is set.
  static std::string default_dir();

  /// `report` defaults to a line on stderr. The directory is created on the first write.
  explicit TuningDb(std::string dir, Reporter report = nullptr);

  const std::string& dir() const { return dir_; }
  std::string path_for(const TuneKey& key) const;

  /// The entry stored for exactly `key`, or nullopt (absent, unreadable, or another key).
  std::optional<DbEntry> get(const TuneKey& key) const;
  /// Stores `e` under e.key; the last writer wins. User error when the directory cannot be
  /// written (the message says to set TILEPILOT_TUNE_DB).
  void put(DbEntry e) const;
  /// Read-modify-write under the key's lock: `f` sees the current entry (nullopt when absent
  /// or unreadable) and returns the entry to store, or nullopt to keep what is there. Returns
  /// whether it stored.
  bool update(const TuneKey& key,
              const std::function<std::optional<DbEntry>(const std::optional<DbEntry>&)>& f) const;
  /// Every readable entry, in file-name order.
  std::vector<DbEntry> list() const;

private:
  std::optional<DbEntry> read_file(const std::string& path, const TuneKey* expect) const;
  void write_file(const std::string& path, const DbEntry& e) const;
  std::string dir_;
  Reporter report_;
};

} // namespace tp::autotune
