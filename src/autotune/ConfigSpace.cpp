// Config-space enumeration, pre-compile resource estimates and the candidate order.
//
// The estimates model the kernels the CUDA backend emits: wgmma on sm_90a (m64 per warpgroup,
// every warpgroup holds part of the accumulator), mma.sync m16n8k16 per warp on sm_80. They are
// deliberately simple; the ptxas report after compiling (post_compile_reject) is the ground
// truth, so an estimate only has to avoid pruning configs that could work.
#include "autotune/ConfigSpace.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "autotune/Hooks.h"
#include "tilepilot/error.h"

namespace tp::autotune {

namespace {

constexpr int64_t kMaxRegs = 255; // per thread, the hardware limit

std::string fmt_kb(int64_t bytes) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << static_cast<double>(bytes) / 1024.0 << " KB";
  return s.str();
}

int64_t get(const ops::Config& c, const std::string& k, int64_t dflt = 0) {
  auto it = c.find(k);
  return it == c.end() ? dflt : it->second;
}

} // namespace

TargetLimits TargetLimits::for_arch(const std::string& arch) {
  if (arch == "sm_90a") return {"sm_90a", 227 * 1024, 132};
  if (arch == "sm_80") return {"sm_80", 163 * 1024, 108};
  user_error() << "tune: arch '" << arch << "' has no resource model; use sm_90a or sm_80";
  return {};
}

TargetLimits TargetLimits::for_device(const rt::DeviceInfo& d) {
  TargetLimits t = for_arch(d.arch);
  if (d.max_shared_per_block_optin > 0) t.max_smem_bytes = d.max_shared_per_block_optin;
  if (d.sm_count > 0) t.sm_count = d.sm_count;
  return t;
}

std::map<std::string, int64_t> ConfigSpace::pruned_by_category() const {
  std::map<std::string, int64_t> out;
  for (const Candidate& c : pruned)
    ++out[c.category];
  return out;
}

std::vector<ops::Knob> knob_space(const ops::Operator& op, const std::string& arch) {
  return op.knobs(arch);
}

std::vector<ops::Knob> restrict_space(std::vector<ops::Knob> space, const std::string& text) {
  for (const auto& [name, values] : ops::parse_kv(text, "--space")) {
    auto it = std::find_if(space.begin(), space.end(), [&](auto& k) { return k.name == name; });
    if (it == space.end()) {
      std::string known;
      for (const ops::Knob& k : space)
        known += (known.empty() ? "" : ", ") + k.name;
      user_error() << "--space: unknown knob '" << name << "'; knobs are " << known;
    }
    // Values outside the knob's domain are pruned as invalid, with check_config's reason.
    std::vector<int64_t> parsed;
    std::stringstream ss(values);
    std::string item;
    while (std::getline(ss, item, '|')) {
      parsed.push_back(ops::parse_knob_value(name, item, "--space"));
      // A repeated value would compile and time the same configs twice.
      if (std::count(parsed.begin(), parsed.end(), parsed.back()) > 1)
        user_error() << "--space: " << name << "=" << values << " gives " << parsed.back()
                     << " twice; list each value once";
    }
    if (values.back() == '|') ops::parse_knob_value(name, "", "--space"); // "64|": a value missing
    it->values = parsed;
    it->from_default = false; // named here: searched over these values
  }
  return space;
}

void check_space_size(const std::vector<ops::Knob>& knobs) {
  size_t total = 1; // saturates at kMaxSpaceConfigs + 1: many long value lists overflow
  std::string sizes;
  for (const ops::Knob& k : knobs) {
    if (k.values.empty())
      user_error() << "tune: knob '" << k.name << "' has no values; give at least one";
    const size_t n = k.from_default ? 1 : k.values.size(); // the default's value only
    total = std::min(total * std::min(n, kMaxSpaceConfigs + 1), kMaxSpaceConfigs + 1);
    sizes += (sizes.empty() ? "" : " x ") + k.name + " " + std::to_string(n);
  }
  // Every config is estimated (lowered) before the search starts; a space this large would
  // run for hours before the first compile instead of saying so.
  if (total > kMaxSpaceConfigs)
    user_error() << "tune: the space has more than " << kMaxSpaceConfigs << " configs (" << sizes
                 << "); narrow it with --space, e.g. --space bm=64|128,stages=3|4";
}

Candidate estimate(const ops::Operator& op, const ops::Problem& p, const TargetLimits& t,
                   const ops::Config& c) {
  Candidate cand;
  cand.config = c;
  auto prune = [&](const char* category, const std::string& why) {
    cand.category = category;
    cand.reason = why;
    return cand;
  };
  ops::Estimate e;
  try {
    ops::check_config(op, p, c, t.arch);
    e = op.estimate(p, c, t.arch);
  } catch (const UserError& err) {
    return prune("invalid", reason_text(err));
  }
  cand.smem_bytes = e.smem_bytes;
  cand.acc_regs = e.acc_regs;
  if (cand.smem_bytes > t.max_smem_bytes) {
    std::ostringstream why;
    why << "shared memory " << fmt_kb(cand.smem_bytes) << " > " << fmt_kb(t.max_smem_bytes)
        << " per block on " << t.arch;
    return prune("smem", why.str());
  }
  if (e.reg_budget > 0 && cand.acc_regs > e.reg_budget) {
    std::ostringstream why;
    why << "accumulator needs " << cand.acc_regs << " registers per thread > " << e.reg_budget
        << " (255 minus " << kMaxRegs - e.reg_budget << " headroom); it would spill";
    return prune("regs", why.str());
  }
  // The register file is shared by the block: ptxas compiles every thread to at most
  // 64K / (block threads) registers, rounded down to 8, whatever setmaxnreg does later. A
  // config whose surely-live registers alone exceed that share cannot compile (ptxas:
  // "insufficient registers"), so this prunes only sure failures.
  if (e.live_regs > 0 && e.block_threads > 0) {
    const int64_t share = std::min<int64_t>(kMaxRegs, 65536 / e.block_threads / 8 * 8);
    if (e.live_regs > share) {
      std::ostringstream why;
      why << "accumulator needs " << e.live_regs << " registers per thread > " << share
          << ", the share of the register file for " << e.block_threads << " threads per block";
      return prune("regs", why.str());
    }
  }
  if (!e.divisibility.empty()) return prune("divisibility", e.divisibility);
  return cand;
}

ConfigSpace enumerate(const ops::Operator& op, const ops::Problem& p, const TargetLimits& t,
                      const std::vector<ops::Knob>& knobs) {
  check_space_size(knobs);
  ConfigSpace space;
  for (const ops::Knob& k : knobs)
    space.neutral[k.name] = k.neutral;
  const ops::Config dflt = op.default_config(p, t.arch);
  std::vector<size_t> idx(knobs.size(), 0);
  while (true) {
    ops::Config c;
    for (size_t i = 0; i < knobs.size(); ++i)
      c[knobs[i].name] = knobs[i].from_default ? get(dflt, knobs[i].name, knobs[i].neutral)
                                               : knobs[i].values[idx[i]];
    Candidate cand = estimate(op, p, t, c);
    (cand.reason.empty() ? space.kept : space.pruned).push_back(std::move(cand));
    size_t i = 0; // odometer: the first knob turns fastest
    for (; i < knobs.size(); ++i) {
      if (!knobs[i].from_default && ++idx[i] < knobs[i].values.size()) break;
      idx[i] = 0;
    }
    if (i == knobs.size()) break;
  }
  // The operator's default config goes first: it is the baseline the tuned result must beat,
  // and measuring it early gives early stop a realistic bar. It joins the space when the knob
  // values leave it out (the default may use, say, a deeper pipeline than the search does).
  bool has_default = std::any_of(space.kept.begin(), space.kept.end(), [&](const Candidate& c) {
    return is_default_config(c.config, dflt, space.neutral);
  });
  if (!has_default) {
    Candidate d = estimate(op, p, t, dflt);
    if (d.reason.empty()) space.kept.push_back(std::move(d));
  }
  for (Candidate& c : space.kept) {
    // Among configs the heuristic cannot tell apart (swizzle, stages), the ones nearest the
    // default go first: the default is the best-known point, so its neighbours are the safest.
    int64_t distance = 0;
    for (const auto& [k, v] : c.config)
      distance += v != get(dflt, k, get(space.neutral, k));
    c.score = is_default_config(c.config, dflt, space.neutral)
                  ? 1e9
                  : op.score(p, c.config, t.sm_count) * (1 - 1e-3 * distance);
  }
  std::stable_sort(space.kept.begin(), space.kept.end(), [](const auto& a, const auto& b) {
    if (a.score != b.score) return a.score > b.score;
    return ops::config_str(a.config) < ops::config_str(b.config);
  });
  return space;
}

bool is_default_config(const ops::Config& c, const ops::Config& dflt,
                       const std::map<std::string, int64_t>& neutral) {
  // A knob the default leaves out takes the value that changes nothing (its neutral value).
  for (const auto& [k, v] : c) {
    auto it = dflt.find(k);
    if (it == dflt.end() ? v != get(neutral, k) : it->second != v) return false;
  }
  return std::all_of(dflt.begin(), dflt.end(), [&](auto& kv) { return c.count(kv.first) > 0; });
}

std::string post_compile_reject(const rt::ResourceUsage& u) {
  if (u.spill_store_bytes <= 0 && u.spill_load_bytes <= 0) return "";
  std::ostringstream why;
  why << "ptxas spills " << u.spill_store_bytes << " bytes stored / " << u.spill_load_bytes
      << " bytes loaded";
  if (u.registers >= 0) why << " at " << u.registers << " registers";
  why << "; spilling kernels are not measured";
  return why.str();
}

} // namespace tp::autotune
