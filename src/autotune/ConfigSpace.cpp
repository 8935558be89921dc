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

// Registers left for addresses, fragments of A/B, loop state and softmax statistics. 255 is the
// per-thread hardware limit; a kernel whose accumulator leaves less than this spills.
constexpr int64_t kMaxRegs = 255;
constexpr int64_t kGemmHeadroom = 87;      // => at most 168 accumulator registers
constexpr int64_t kAttentionHeadroom = 63; // => at most 192 (FA3-style consumers run at 240)
constexpr int64_t kMbarrierBytes = 8;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

void narrow(std::vector<ops::Knob>& knobs, const std::string& name, std::vector<int64_t> values) {
  for (ops::Knob& k : knobs)
    if (k.name == name) k.values = std::move(values);
}

std::string fmt_kb(int64_t bytes) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << static_cast<double>(bytes) / 1024.0 << " KB";
  return s.str();
}

int64_t get(const ops::Config& c, const char* k, int64_t dflt = 0) {
  auto it = c.find(k);
  return it == c.end() ? dflt : it->second;
}

// Whether the CUDA backend loads this problem's operands with TMA (and so runs a producer
// warpgroup on sm_90a): every loaded tensor's rows must be 16-byte multiples.
bool tma_rows(const ops::Problem& p) {
  const int64_t elem = dtype_bytes(p.dtype);
  if (p.op == "attention") return p.at("D") * elem % 16 == 0;
  if (p.op != "gemm") return false;
  const std::string& l = p.options.at("layout");
  const int64_t a_row = l[0] == 'n' ? p.at("K") : p.at("M");
  const int64_t b_row = l[1] == 'n' ? p.at("N") : p.at("K");
  return a_row * elem % 16 == 0 && b_row * elem % 16 == 0;
}

// Divisibility of the block tile over the arch's MMA units; "" when it divides.
std::string divisibility(const std::string& op, const std::string& arch, int64_t bm, int64_t bn,
                         int64_t threads) {
  std::ostringstream why;
  if (arch == "sm_90a") {
    if (threads % 128)
      why << "threads=" << threads << " is not whole warpgroups (a multiple of 128); wgmma is "
          << "issued by warpgroups";
    else if (bm % 64)
      why << "bm=" << bm << " is not a multiple of 64, the M of one wgmma";
    else if (int64_t w = threads / 128; (bm / 64) % w)
      // The compiler's wgmma accumulator layout gives each warpgroup whole 64-row slabs
      // (InferLayouts); otherwise the gemm falls back to a slow path whose accumulator lives in
      // shared memory, which the tuner would compile only to reject.
      why << "bm=" << bm << " gives " << bm / 64 << " 64-row slab(s) for " << w
          << " warpgroups; bm must be a multiple of 64 x warpgroups (each owns whole slabs"
          << (op == "attention" ? ", and its rows' softmax)" : " of the accumulator)");
  } else if (arch == "sm_80") {
    int64_t warps = threads / 32;
    if (threads % 32)
      why << "threads=" << threads << " is not whole warps (a multiple of 32)";
    else if (op == "attention" && bm % (16 * warps))
      why << "bm=" << bm << " is not a multiple of 16 x " << warps
          << " warps; each warp owns 16-row query slabs";
    else if (op == "gemm" && (bm % 16 || bn % 8 || ((bm / 16) * (bn / 8)) % warps))
      why << "bm=" << bm << ", bn=" << bn << " has " << (bm / 16) * (bn / 8)
          << " m16n8 tiles, which do not divide evenly over " << warps << " warps";
  }
  return why.str();
}

// Shape-aware preference: little padding in the last tile, full waves over the SMs, high
// arithmetic intensity per tile. Only the order depends on it (what early stop and a budget
// see first); nothing is pruned by it, so bm=256 for M=1 is still tried, just late.
double score(const ops::Operator& op, const ops::Problem& p, const TargetLimits& t,
             const ops::Config& c) {
  int64_t bm = get(c, "bm", 64), bn = get(c, "bn", 64);
  double used = 0, padded = 0, tiles = 0, intensity = 0;
  if (op.name() == "gemm") {
    int64_t M = p.at("M"), N = p.at("N");
    used = static_cast<double>(M) * static_cast<double>(N);
    padded = static_cast<double>(ceil_div(M, bm) * bm) * static_cast<double>(ceil_div(N, bn) * bn);
    tiles = static_cast<double>(ceil_div(M, bm) * ceil_div(N, bn));
    intensity = static_cast<double>(bm * bn) / static_cast<double>(bm + bn) / 128.0;
  } else if (op.name() == "attention") {
    int64_t S = p.at("S");
    used = static_cast<double>(S);
    padded = static_cast<double>(ceil_div(S, bm) * bm);
    tiles = static_cast<double>(ceil_div(S, bm) * p.at("B") * p.at("H"));
    intensity = static_cast<double>(bm) / 128.0 * (bn >= 64 ? 1.0 : 0.8);
  } else {
    return 0;
  }
  double sms = std::max(1, t.sm_count);
  double waves = std::ceil(tiles / sms);
  return used / padded * (tiles / (waves * sms)) * std::sqrt(intensity);
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
  std::vector<ops::Knob> knobs = op.knobs();
  if (op.name() == "gemm") {
    // A 1-stage pipeline never overlaps copy and compute; the tuner does not spend time on it.
    narrow(knobs, "stages", {2, 3, 4, 5});
    if (arch == "sm_90a") narrow(knobs, "bk", {64});
    // Clusters multicast TMA loads; without TMA the annotation would be dropped.
    if (arch != "sm_90a") narrow(knobs, "cluster", {1});
    // Persistent GEMM blocks were never faster on the H200 (device run s2, 2026-11-30: 8192^3
    // +1.1 % time, M=128 +10 %, 4096^3 nt -0.2 %); the tuner spends its time elsewhere. A
    // --space that names the knob still tries it.
    narrow(knobs, "persistent", {0});
  }
  // The persistent schedule exists for warp-specialized (TMA) kernels only.
  if (arch != "sm_90a") narrow(knobs, "persistent", {0});
  // Ping-pong turns were slower than free-running warpgroups on 7 of 8 attention shapes (6-14 %,
  // H200 device run s3, 2026-11-30); the tuner leaves them out unless a --space names them.
  narrow(knobs, "pingpong", {0});
  // The deferred P.V (overlap=1, attention) is the sm_90a default; it needs warp-specialized
  // TMA kernels.
  if (arch != "sm_90a") narrow(knobs, "overlap", {0});
  return knobs;
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
    std::vector<int64_t> parsed;
    std::stringstream ss(values);
    std::string item;
    while (std::getline(ss, item, '|')) {
      size_t pos = 0;
      long long v = -1;
      try {
        v = std::stoll(item, &pos);
      } catch (const std::exception&) {}
      if (v < 0 || pos != item.size() || item.empty())
        user_error() << "--space: " << name << "=" << values << ": '" << item
                     << "' is not a non-negative integer; write e.g. " << name << "=64|128";
      parsed.push_back(v);
    }
    it->values = parsed;
  }
  return space;
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
  try {
    op.validate(p, c);
  } catch (const UserError& e) {
    return prune("invalid", reason_text(e));
  }
  const std::string name = op.name();
  if (name != "gemm" && name != "attention") return cand; // no resource model: keep
  const int64_t elem = dtype_bytes(p.dtype);
  const int64_t bm = c.at("bm"), bn = c.at("bn"), stages = c.at("stages"),
                threads = c.at("threads");
  const bool hopper = t.arch == "sm_90a";
  int64_t headroom = kGemmHeadroom;
  if (name == "gemm") {
    const int64_t bk = c.at("bk");
    // A and B tiles per stage; on sm_90a a full and an empty mbarrier per stage.
    cand.smem_bytes =
        stages * (bm * bk + bk * bn) * elem + (hopper ? stages * 2 * kMbarrierBytes : 0);
    cand.acc_regs = ceil_div(bm * bn, threads);
  } else {
    const int64_t D = p.at("D");
    // Q once, K and V per stage; on sm_90a one mbarrier each for Q and per stage for K, V.
    cand.smem_bytes =
        (bm * D + stages * 2 * bn * D) * elem + (hopper ? (1 + 2 * stages) * kMbarrierBytes : 0);
    // O (fp32), scores (fp32) and probabilities (input dtype, packed) stay in registers.
    cand.acc_regs = ceil_div(bm * D + bm * bn + bm * bn * elem / 4, threads);
    headroom = kAttentionHeadroom;
  }
  if (cand.smem_bytes > t.max_smem_bytes) {
    std::ostringstream why;
    why << "shared memory " << fmt_kb(cand.smem_bytes) << " > " << fmt_kb(t.max_smem_bytes)
        << " per block on " << t.arch;
    return prune("smem", why.str());
  }
  if (cand.acc_regs > kMaxRegs - headroom) {
    std::ostringstream why;
    why << "accumulator needs " << cand.acc_regs << " registers per thread > "
        << kMaxRegs - headroom << " (255 minus " << headroom << " headroom); it would spill";
    return prune("regs", why.str());
  }
  // The register file is shared by the block: ptxas compiles every thread to at most
  // 64K / (block threads) registers, rounded down to 8, whatever setmaxnreg does later. On sm_90a
  // a TMA kernel adds a 128-thread producer warpgroup. An accumulator that alone exceeds that
  // share cannot compile (ptxas: "insufficient registers"), so this prunes only sure failures:
  // for attention it counts O and the fp32 scores only (P is converted in place; with P counted,
  // D=256's 128x64 default, which fits, would go).
  const int64_t block_threads = threads + (hopper && tma_rows(p) ? 128 : 0);
  const int64_t share = std::min<int64_t>(kMaxRegs, 65536 / block_threads / 8 * 8);
  const int64_t live = name == "gemm" ? cand.acc_regs : ceil_div(bm * p.at("D") + bm * bn, threads);
  if (live > share) {
    std::ostringstream why;
    why << "accumulator needs " << live << " registers per thread > " << share
        << ", the share of the register file for " << block_threads << " threads per block";
    return prune("regs", why.str());
  }
  if (std::string why = divisibility(name, t.arch, bm, bn, threads); !why.empty())
    return prune("divisibility", why);
  return cand;
}

ConfigSpace enumerate(const ops::Operator& op, const ops::Problem& p, const TargetLimits& t,
                      const std::vector<ops::Knob>& knobs) {
  ConfigSpace space;
  for (const ops::Knob& k : knobs)
    if (k.values.empty())
      user_error() << "tune: knob '" << k.name << "' has no values; give at least one";
  std::vector<size_t> idx(knobs.size(), 0);
  while (true) {
    ops::Config c;
    for (size_t i = 0; i < knobs.size(); ++i)
      c[knobs[i].name] = knobs[i].values[idx[i]];
    Candidate cand = estimate(op, p, t, c);
    (cand.reason.empty() ? space.kept : space.pruned).push_back(std::move(cand));
    size_t i = 0; // odometer: the first knob turns fastest
    for (; i < knobs.size(); ++i) {
      if (++idx[i] < knobs[i].values.size()) break;
      idx[i] = 0;
    }
    if (i == knobs.size()) break;
  }
  // The operator's default config goes first: it is the baseline the tuned result must beat,
  // and measuring it early gives early stop a realistic bar. It joins the space when the knob
  // values leave it out (the default may use, say, a deeper pipeline than the search does).
  ops::Config dflt = op.default_config(p, t.arch);
  bool has_default = std::any_of(space.kept.begin(), space.kept.end(), [&](const Candidate& c) {
    return is_default_config(c.config, dflt);
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
      distance += v != get(dflt, k.c_str());
    c.score =
        is_default_config(c.config, dflt) ? 1e9 : score(op, p, t, c.config) * (1 - 1e-3 * distance);
  }
  std::stable_sort(space.kept.begin(), space.kept.end(), [](const auto& a, const auto& b) {
    if (a.score != b.score) return a.score > b.score;
    return ops::config_str(a.config) < ops::config_str(b.config);
  });
  return space;
}

bool is_default_config(const ops::Config& c, const ops::Config& dflt) {
  // A knob the default leaves out takes the value that changes nothing: no rasterization
  // panel (swizzle 0), no cluster (1 block).
  auto neutral = [](const std::string& k) -> int64_t { return k == "cluster" ? 1 : 0; };
  for (const auto& [k, v] : c) {
    auto it = dflt.find(k);
    if (it == dflt.end() ? v != neutral(k) : it->second != v) return false;
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
