// Temporary files of the on-disk stores (the kernel cache, the tuning database): each write goes
// to a temporary file in the store's directory and is renamed over the entry, so readers see the
// old or the new entry. A writer killed between open and rename leaves its temporary file behind;
// it is never read, and the sweep below removes it on a later write.
#pragma once
#include <string>

namespace tp::rt {

/// A fresh temporary path in `dir` for this process: "<dir>/.tmp.<pid>.<n>.<tag>". The pid in
/// the name is what lets a later sweep tell an orphan from a live writer's file.
std::string temp_path(const std::string& dir, const std::string& tag);

/// Removes the files of `dir` named by temp_path (and, for stores written before this naming,
/// ".tmp-<key>-<pid>-<n>") that no live writer can still rename: their process is gone from this
/// host and the file is older than `min_age_s` (a margin for a writer on another host sharing the
/// directory), or the file is older than a day whatever its pid. Best effort: errors are ignored.
/// Returns the number removed.
int sweep_orphan_temps(const std::string& dir, double min_age_s = 10);

} // namespace tp::rt
