// The pilot's output folder is never half-written and never loses an earlier result: a run
// writes into a fresh hidden sibling (".<name>.tilepilot-staging-<pid>") and only at the end
// swaps it in place of the folder with one atomic rename (renameat2 RENAME_EXCHANGE), so a run
// killed at any point leaves the earlier report, release/ and repro/ exactly as they were.
// Leftover siblings of dead runs are swept by the next run into the same folder. Regular files
// of the user's in the folder (a log the run is tee'd into) are carried over by hard links; a
// folder holding other folders or special files is refused unless forced.
#pragma once
#include <string>
#include <vector>

namespace tp::pilot {

struct OutputDir {
  std::string final_dir;   // absolute, normalized: what reports and commands name
  std::string staging_dir; // where this run writes
};

/// File names a pilot writes at the top of its output folder.
const std::vector<std::string>& pilot_output_names();

/// Checks `out` (a folder, or absent; not the current folder or one above it; when it holds a
/// folder or special file that is not a pilot's output, only with `force`), sweeps stale
/// staging siblings and creates this run's staging folder. User error naming the path and the
/// fix otherwise.
OutputDir prepare_output_dir(const std::string& out, bool force);

/// Swaps the staging folder in as final_dir (atomically), carrying over the user's regular
/// files, and removes what was there before.
void commit_output_dir(const OutputDir& d);

/// Removes the staging folder of a run that did not finish; never throws.
void abandon_output_dir(const OutputDir& d) noexcept;

} // namespace tp::pilot
