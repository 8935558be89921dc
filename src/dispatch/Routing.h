// The dispatch decision, separate from running anything: which release an operator has (or why
// it has none), and whether a problem on a device lies inside that release's tested matrix.
// Pure functions over pilot::Release, so every reason is testable without a GPU.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "pilot/ReleaseManifest.h"
#include "tilepilot/dispatch.h"

namespace tp::dispatch {

/// One operator's release: loaded, or the reason it is not usable.
struct ReleaseSlot {
  std::optional<pilot::Release> release;
  std::string device_name; // the GPU the release was tested on; "" when it did not record one
  std::string load_error;  // release_invalid: what the loader said
};

/// Loads release folders and files them by operator. A folder that fails to load is kept as a
/// load error for the operator its manifest names (or for every operator when even that cannot
/// be read). User error when two folders claim one operator.
std::map<std::string, ReleaseSlot> load_releases(const std::vector<std::string>& dirs);

/// The slot for an in-memory release (the pilot's model stage, tests).
ReleaseSlot slot_for(pilot::Release r);

/// The name of the GPU the release was tested on, from its manifest's environment: the first
/// GPU whose arch is the released device. "" when none was recorded.
std::string released_device_name(const pilot::Release& r);

struct Route {
  bool pinned = false;
  ops::FallbackReason reason = ops::FallbackReason::no_release;
  std::string why;
  const pilot::PinnedEntry* entry = nullptr; // when pinned
};

/// The decision for `p` on `dev`, in this order: forced, no release / invalid, device (arch,
/// then name when the release recorded one), dtype tested on this device, exact shape tested,
/// test passed, pinned entry present. `slot` may be null (no release given).
Route route(const ReleaseSlot* slot, const ops::DeviceIdentity& dev, const ops::Problem& p,
            bool forced);

/// The identity a host call matches with when the options name none: the release's own device,
/// since the interpreter stands in for it.
ops::DeviceIdentity host_identity(const ReleaseSlot* slot);

} // namespace tp::dispatch
