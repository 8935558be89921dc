// Release loading and the dispatch decision.
#include "dispatch/Routing.h"

#include <sstream>

#include "pilot/Files.h"

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
    auto j = nlohmann::json::parse(pilot::read_text(dir + "/manifest.json"));
    return j.value("operator", "");
  } catch (const std::exception&) {
    return "";
  }
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i)
    os << (i ? ", " : "") << s[i];
  return os.str() + "]";
}

} // namespace

std::string released_device_name(const pilot::Release& r) {
  const nlohmann::json gpus = r.manifest.value("environment", nlohmann::json::object())
                                  .value("gpus", nlohmann::json::array());
  for (const auto& g : gpus)
    if (g.value("arch", "") == r.device) return g.value("name", "");
  return "";
}

ReleaseSlot slot_for(pilot::Release r) {
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
      slot = slot_for(pilot::load_release(dir));
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
    for (const char* op : {"gemm", "attention"})
      if (!out.count(op)) out[op].load_error = e;
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
  const pilot::Release& rel = *slot->release;
  if (dev.arch != rel.device)
    return fall(FallbackReason::device_mismatch,
                "device " + dev.name + " (" + dev.arch + ") is not the released " + rel.device);
  if (!slot->device_name.empty() && dev.name != slot->device_name)
    return fall(FallbackReason::device_mismatch, "device " + dev.name + " is not the " +
                                                     slot->device_name +
                                                     " the release was tested on");
  const pilot::MatrixEntry* tested = nullptr;
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
  for (const auto& e : rel.pinned)
    if (same_problem(e.problem, p)) {
      r.pinned = true;
      r.entry = &e;
      return r;
    }
  return fall(FallbackReason::shape_outside_matrix,
              "shape " + p.shape_str() + " was tested but has no pinned kernel");
}

ops::Problem gemm_problem(DType dtype, const std::string& layout, const std::vector<int64_t>& a,
                          const std::vector<int64_t>& b, const std::vector<int64_t>& c, DType tb,
                          DType tc) {
  if (tb != dtype || tc != dtype)
    user_error() << "gemm: A is " << dtype_name(dtype) << " but B is " << dtype_name(tb)
                 << " and C is " << dtype_name(tc) << "; use one dtype for all three";
  if (a.size() != 2 || b.size() != 2 || c.size() != 2)
    user_error() << "gemm: A, B and C must be 2-d, got A " << shape_text(a) << ", B "
                 << shape_text(b) << ", C " << shape_text(c);
  if (layout != "nn" && layout != "nt" && layout != "tn")
    user_error() << "gemm: layout " << layout << " is not supported; use nn, nt or tn";
  int64_t M = layout == "tn" ? a[1] : a[0], K = layout == "tn" ? a[0] : a[1];
  int64_t N = layout == "nt" ? b[0] : b[1], Kb = layout == "nt" ? b[1] : b[0];
  if (Kb != K || c[0] != M || c[1] != N)
    user_error() << "gemm: shapes do not agree for layout " << layout << ": A " << shape_text(a)
                 << ", B " << shape_text(b) << ", C " << shape_text(c) << "; layout " << layout
                 << " needs A " << (layout == "tn" ? "[K, M]" : "[M, K]") << ", B "
                 << (layout == "nt" ? "[N, K]" : "[K, N]") << ", C [M, N]";
  return ops::find_operator("gemm").parse({{"M", std::to_string(M)},
                                           {"N", std::to_string(N)},
                                           {"K", std::to_string(K)},
                                           {"layout", layout}},
                                          dtype);
}

ops::Problem attention_problem(DType dtype, const std::vector<int64_t>& q,
                               const std::vector<int64_t>& k, const std::vector<int64_t>& v,
                               const std::vector<int64_t>& o, bool causal, DType tk, DType tv,
                               DType to) {
  if (tk != dtype || tv != dtype || to != dtype)
    user_error() << "attention: Q is " << dtype_name(dtype) << " but K, V, O are " << dtype_name(tk)
                 << ", " << dtype_name(tv) << ", " << dtype_name(to)
                 << "; use one dtype for all four";
  if (q.size() != 4 || k.size() != 4 || v.size() != 4 || o.size() != 4)
    user_error() << "attention: Q, K, V, O must be 4-d [batch, heads, seq, D], got Q "
                 << shape_text(q) << ", K " << shape_text(k) << ", V " << shape_text(v) << ", O "
                 << shape_text(o);
  if (k != v || o != q || k[0] != q[0] || k[3] != q[3])
    user_error() << "attention: shapes do not agree: Q " << shape_text(q) << ", K " << shape_text(k)
                 << ", V " << shape_text(v) << ", O " << shape_text(o)
                 << "; need Q, O [B, H, S, D] and K, V [B, Hkv, Skv, D]";
  return ops::find_operator("attention")
      .parse({{"B", std::to_string(q[0])},
              {"H", std::to_string(q[1])},
              {"S", std::to_string(q[2])},
              {"D", std::to_string(q[3])},
              {"Hkv", std::to_string(k[1])},
              {"Skv", std::to_string(k[2])},
              {"causal", causal ? "1" : "0"}},
             dtype);
}

} // namespace tp::dispatch
