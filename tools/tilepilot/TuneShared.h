// What `tilepilot tune` and `tilepilot tune --spec` share: storing a winner in the tuning
// database.
#pragma once
#include <string>

#include "autotune/Tuner.h"
#include "tilepilot/runtime.h"

namespace tp::cli {

/// Stores a found winner under make_key(p, device) with `dflt`'s median from the same search;
/// returns the file written.
std::string store_winner(const ops::Problem& p, const rt::DeviceInfo& device,
                         const autotune::TuneResult& r, const ops::Config& dflt,
                         const std::string& source);

} // namespace tp::cli
