// Release loading and the dispatch decision.
#include "dispatch/Routing.h"

#include <sstream>

#include "release/Files.h"

namespace tp::dispatch {

using ops::FallbackReason;

namespace {

bool same_problem(const ops::Problem& a, const ops::Problem& b) {
  return a.op == b.op && a.dtype == b.dtype && a.shape == b.shape && a.options == b.options;
}

/// The operator a release folder's manifest names, read without checking anything else, so that
/// a folder that fails its hash check is still charged to the right operator. "" if unreadable.
std::string manifest_operator(const std::string& dir) {
  try {
    auto j = nlohmann::json::parse(release::read_text(dir + "/manifest.json"));
    return j.value("operator", "");
  } catch (const std::exception&) {
    return "";
  }
}

} // namespace

std::string released_device_name(const release::Release& r) {
  const nlohmann::json gpus = r.manifest.value("environment", nlohmann::json::object())
                                  .value("gpus", nlohmann::json::array());
  for (const auto& g : gpus)
    if (g.value("arch", "") == r.device) return g.value("name", "");
  return "";
}

ReleaseSlot slot_for(release::Release r) {
  ReleaseSlot s;
  s.device_name = released_device_name(r);
  s.release = std::move(r);
  return s;
}

std::map<std::string, ReleaseSlot> load_releases(const std::vector<std::string>& dirs) {
  std::map<std::string, ReleaseSlot> out;
  std::map<std::string, std::string> dir_of;
  std::vector<std::string> orphan_errors; // folders whose operator cannot be told
  for (const std::string& dir : dirs) {
    ReleaseSlot slot;
    std::string op;
    try {
      slot = slot_for(release::load_release(dir));
      op = slot.release->op;
    } catch (const std::exception& e) { // UserError, or JSON missing a key
      op = manifest_operator(dir);
      slot.load_error = std::string("release folder ") + dir + " does not load: " + e.what();
      if (op.empty()) {
        orphan_errors.push_back(slot.load_error);
        continue;
      }
    }
    if (dir_of.count(op))
      user_error() << "dispatch: two release folders for " << op << ": " << dir_of[op] << " and "
                   << dir << "; pass one release per operator";
    dir_of[op] = dir;
    out[op] = std::move(slot);
  }
  // An unreadable folder might have been any operator's: charge it to each one left without.
  for (const std::string& e : orphan_errors)
    for (const ops::Operator* op : ops::all_operators())
      if (!out.count(op->name())) out[op->name()].load_error = e;
  return out;
}

ops::DeviceIdentity host_identity(const ReleaseSlot* slot) {
  if (!slot || !slot->release) return {"CPU interpreter", "cpu"};
  return {slot->device_name, slot->release->device};
}

Route route(const ReleaseSlot* slot, const ops::DeviceIdentity& dev, const ops::Problem& p,
            bool forced) {
  Route r;
  auto fall = [&](FallbackReason why, std::string text) {
    r.reason = why;
    r.why = std::move(text);
    return r;
  };
  if (forced) return fall(FallbackReason::forced, p.op + " is forced to its fallback");
  if (!slot || (!slot->release && slot->load_error.empty()))
    return fall(FallbackReason::no_release, "no release folder for " + p.op +
                                                " (pass the pilot's release/ folder, e.g. via "
                                                "$TILEPILOT_RELEASE)");
  if (!slot->release) return fall(FallbackReason::release_invalid, slot->load_error);
  const release::Release& rel = *slot->release;
  if (dev.arch != rel.device)
    return fall(FallbackReason::device_mismatch,
                "device " + dev.name + " (" + dev.arch + ") is not the released " + rel.device);
  if (!slot->device_name.empty() && dev.name != slot->device_name)
    return fall(FallbackReason::device_mismatch, "device " + dev.name + " is not the " +
                                                     slot->device_name +
                                                     " the release was tested on");
  const release::MatrixEntry* tested = nullptr;
  bool dtype_tested = false;
  for (const auto& m : rel.matrix) {
    if (m.device != rel.device || m.problem.dtype != p.dtype) continue;
    dtype_tested = true;
    if (same_problem(m.problem, p)) tested = &m;
  }
  if (!dtype_tested)
    return fall(FallbackReason::dtype_outside_matrix,
                std::string("dtype ") + dtype_name(p.dtype) + " is not in the tested matrix");
  if (!tested)
    return fall(FallbackReason::shape_outside_matrix,
                "shape " + p.shape_str() + " is not in the tested matrix");
  if (!tested->passed)
    return fall(FallbackReason::failed_test, "shape " + p.shape_str() + " failed its test");
  if (const release::FrameworkRouted* f = rel.routed_to_framework(p))
    return fall(FallbackReason::framework_faster, rel.framework_faster_text(*f));
  for (const auto& e : rel.pinned)
    if (same_problem(e.problem, p)) {
      r.pinned = true;
      r.entry = &e;
      return r;
    }
  return fall(FallbackReason::shape_outside_matrix,
              "shape " + p.shape_str() + " was tested but has no pinned kernel");
}

} // namespace tp::dispatch
