// What `tilepilot tune` and `tilepilot tune --spec` share: reading the default's timing out of a
// search log and storing a winner in the tuning database.
#pragma once
#include <string>

#include "autotune/Tuner.h"
#include "tilepilot/runtime.h"

namespace tp::cli {

/// The full-measurement median of `dflt` in the search log; -1 when it was not fully measured
/// (pruned, failed, early-stopped or skipped).
double default_ms_in_log(const autotune::TuneResult& r, const ops::Config& dflt);

/// Stores a found winner under make_key(p, device); returns the file written.
std::string store_winner(const ops::Problem& p, const rt::DeviceInfo& device,
                         const autotune::TuneResult& r, double default_ms,
                         const std::string& source);

} // namespace tp::cli
