// The compute-sanitizer sweep's shape list (scripts/sanitizer-shapes.txt, run on the H200 by
// scripts/sanitizer-sweep) reaches every kernel the shipped sm_90a defaults compile: over a
// grid of shapes per operator, each distinct default config, in each launch variant it takes
// (tma; notma when a TMA-loaded tensor's rows are not 16-byte aligned; plain when the kernel
// loads nothing through TMA; per kernel of a program of several), is produced by some line of
// the list. The grids vary every shape
// key over a spread that includes the boundaries of each operator's default_config, so a
// config that a new rule adds shows up here as a line the list is missing.
#include <gtest/gtest.h>

#include <algorithm>

#include <fstream>
#include <set>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ir/IRPrinter.h"
#include "ops/Operator.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::ops;

namespace {

const std::string kArch = "sm_90a";
const std::string kList = TILEPILOT_TESTS_DIR "/../scripts/sanitizer-shapes.txt";
// The list's tensors stay small so that a memcheck run over the whole grid takes seconds.
constexpr double kMaxLineBytes = 64.0 * 1024 * 1024;

struct Line {
  int number;
  std::string op, shape, why;
};

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<Line> read_list() {
  std::ifstream in(kList);
  if (!in) ADD_FAILURE() << "cannot read " << kList;
  std::vector<Line> out;
  int n = 0;
  for (std::string text; std::getline(in, text);) {
    ++n;
    if (trim(text).empty() || trim(text)[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, '|');)
      f.push_back(trim(item));
    if (f.size() != 3 || f[0].empty() || f[1].empty() || f[2].empty()) {
      ADD_FAILURE() << kList << ":" << n << ": want 'op | shape | why', got '" << text << "'";
      continue;
    }
    out.push_back({n, f[0], f[1], f[2]});
  }
  return out;
}

/// Which variant of each kernel of `p`'s default program a `tilepilot check` launches (its
/// tensors dense, so a row is aligned when its bytes are a multiple of 16:
/// CudaKernel::wants_tma's rule), joined by '+' for a program of several steps. A parameter is
/// the call's argument or intermediate its step binds it to. Lowering is the slow part; which
/// parameters TMA loads depends only on the kernel's IR.
class Variants {
public:
  std::string of(const Operator& op, const Problem& p, const Config& c) {
    KernelProgram prog = op.program(p, c);
    std::vector<ArgSpec> specs = op.arg_specs(p);
    specs.insert(specs.end(), prog.intermediates.begin(), prog.intermediates.end());
    std::string out;
    for (const KernelStep& s : prog.steps) {
      out += out.empty() ? "" : "+";
      // TMA loads decide tma / notma; with them, a TMA-stored tensor whose rows are not 16-byte
      // multiples is stored from registers instead.
      auto aligned = [&](int i) {
        const ArgSpec& a = specs.at(s.args.at(i));
        return a.shape.back() * dtype_bytes(a.dtype) % 16 == 0;
      };
      bool loads = false, loads_aligned = true, stores_aligned = true;
      for (const cuda::TmaParam& t : tma_params(s.kernel)) {
        loads |= !t.store;
        (t.store ? stores_aligned : loads_aligned) &= aligned(t.param);
      }
      out += !loads ? "plain" : !loads_aligned ? "notma" : stores_aligned ? "tma" : "tma-regstores";
    }
    return out;
  }

private:
  const std::vector<cuda::TmaParam>& tma_params(const Kernel& k) {
    std::string key = ir::to_string(k.node(), true);
    auto it = tma_params_.find(key);
    if (it == tma_params_.end())
      it = tma_params_.emplace(key, cuda::lower_kernel(k, passes::Target::parse(kArch)).tmas).first;
    return it->second;
  }

  std::map<std::string, std::vector<cuda::TmaParam>> tma_params_;
};

using Grid = std::vector<std::pair<std::string, std::vector<std::string>>>;

std::vector<std::string> range(int64_t lo, int64_t hi, int64_t step) {
  std::vector<std::string> out;
  for (int64_t x = lo; x <= hi; x += step)
    out.push_back(std::to_string(x));
  return out;
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// Per operator, the keys and values whose product is searched (a key left out, or given the
/// value "", takes its default). Each comment names the default_config boundary the values
/// straddle.
std::map<std::string, Grid> grids() {
  // gemm sm_90a: a wave-efficiency score over six tiles of 64..256 in M and N (K up to 4096, so
  // that a default splitting K at small M would be reached).
  std::vector<std::string> mn = {"1", "8", "63", "64", "65", "72", "127", "128", "129", "136",
                                 "192", "200", "256", "264", "320", "384", "512", "640", "768",
                                 "1024", "1152", "1536", "2048", "2816", "3072", "4096", "6144",
                                 "8192", "16384",
                                 // odd widths where the large tiles are chosen: rows that are
                                 // not 16-byte aligned (notma, register stores of C)
                                 "1671", "2807", "14330"};
  // rmsnorm: threads round H / 8 up to 32 between 128 and 1024, steps at H = 256 k + 8.
  std::vector<std::string> rms_h = {"1", "7", "8", "1000", "1001", "16384"};
  for (int64_t k = 1; k <= 33; ++k)
    for (int64_t d : {-1, 0, 7, 8})
      rms_h.push_back(std::to_string(256 * k + d));
  // rope: threads round H D / 32 up to 32 between 32 and 1024, steps at H D = 1024 k.
  std::vector<std::string> rope_h = plus(range(1, 72, 1), {"96", "128"});
  return {
      {"gemm",
       {{"M", mn},
        {"N", mn},
        {"K", {"8", "64", "100", "448", "520", "1000", "4096"}},
        {"layout", {"nn", "nt", "tn"}}}},
      {"attention",
       {{"B", {"1", "3"}},
        {"H", {"1", "4"}},
        {"Hkv", {"1", "2"}},
        {"S", {"1", "127", "128", "1000"}},
        {"Skv", {"1", "200"}},
        // D <= 128 takes the persistent overlapped tile, larger D the per-tile one.
        {"D", {"16", "32", "64", "112", "128", "144", "192", "256"}},
        {"causal", {"0", "1"}},
        {"lse", {"0", "1"}}}},
      {"rmsnorm", {{"T", {"1", "3", "1000"}}, {"H", rms_h}, {"residual", {"0", "1"}}}},
      // swiglu: T < 8 takes one-row tiles.
      {"swiglu",
       {{"T", {"1", "7", "8", "9", "4096"}}, {"I", {"1", "255", "256", "1000", "14336"}}}},
      {"rope",
       {{"T", {"1", "5"}},
        {"H", rope_h},
        {"Hkv", {"1", "8"}},
        {"D", {"2", "64", "126", "128", "256", "510", "512"}},
        {"scaling", {"llama3", "none"}}}},
      // decode_attention: bn is the page size when paged, else 64.
      {"decode_attention",
       {{"B", {"1", "2"}},
        {"H", {"4", "8"}},
        {"Hkv", {"1", "4"}},
        {"Sq", {"1", "3", "8"}},
        {"D", {"64", "128"}},
        {"L", {"1", "100", "4096"}},
        {"paged", {"0", "1"}},
        {"block", {"", "16", "32", "64", "128", "256"}}}},
      // w4a16_gemm: M <= 64 is decode (bn 64 from N = 132 x 64); bk is the nearest step to
      // 128 (decode) or 64 that nests with group.
      {"w4a16_gemm",
       {{"M", {"1", "64", "65", "300"}},
        {"N", {"1", "8", "100", "101", "8447", "8448", "8449"}},
        {"group", range(8, 1024, 8)},
        {"K", range(8, 1024, 8)}}},
      // grouped_gemm: R / E >= 128 rows per expert takes gemm's large tile.
      {"grouped_gemm",
       {{"E", {"1", "2", "3", "8"}},
        {"R", {"1", "127", "128", "255", "256", "1024", "1025"}},
        {"N", {"1", "100", "256"}},
        {"K", {"8", "100", "256"}},
        {"layout", {"nt", "nn"}}}},
  };
}

/// Calls `f` on every problem of the grid that the operator's parse accepts.
template <class F>
void for_each_problem(const Operator& op, const Grid& g, F&& f) {
  std::vector<size_t> at(g.size(), 0);
  while (true) {
    std::map<std::string, std::string> kv;
    for (size_t i = 0; i < g.size(); ++i)
      if (!g[i].second[at[i]].empty()) kv[g[i].first] = g[i].second[at[i]];
    try {
      f(op.parse(kv, DType::bf16));
    } catch (const UserError&) {} // a combination the operator rejects (K % group, H % Hkv)
    size_t i = 0;
    while (i < g.size() && ++at[i] == g[i].second.size())
      at[i++] = 0;
    if (i == g.size()) return;
  }
}

double tensor_bytes(const Operator& op, const Problem& p) {
  double bytes = 0;
  for (const ArgSpec& a : op.arg_specs(p)) {
    double n = dtype_bytes(a.dtype);
    for (int64_t d : a.shape)
      n *= static_cast<double>(d);
    bytes += n;
  }
  return bytes;
}

/// A kernel as the sweep tells kernels apart: its config and launch variant, with
/// decode_attention's and gemm's split count folded to one or several (the count changes the
/// grid and the combine's unrolled length, not which code paths run).
std::string kernel_of(const Config& c, const std::string& variant) {
  Config k = c;
  if (auto it = k.find("splits"); it != k.end()) it->second = std::min<int64_t>(it->second, 2);
  return config_str(k) + " " + variant;
}

TEST(SanitizerShapes, EveryLineParsesAndIsSmall) {
  std::vector<Line> lines = read_list();
  ASSERT_FALSE(lines.empty());
  for (const Line& l : lines) {
    SCOPED_TRACE(kList + ":" + std::to_string(l.number) + ": " + l.op + " " + l.shape);
    try {
      const Operator& op = find_operator(l.op);
      Problem p = op.parse(parse_kv(l.shape, "--shape"), DType::bf16);
      const Config c = op.default_config(p, kArch);
      check_config(op, p, c, kArch);
      // The default must run: its plan fits the target's shared memory (w4a16's prefill tile
      // at group 72 did not, and `check` refused it on the GPU).
      EXPECT_LE(op.estimate(p, c, kArch).smem_bytes, passes::Target::parse(kArch).smem_limit())
          << config_str(c);
      double bytes = tensor_bytes(op, p);
      EXPECT_LE(bytes, kMaxLineBytes) << "tensors of " << bytes / 1e6 << " MB; keep lines small";
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(SanitizerShapes, ListReachesEveryDefaultKernel) {
  std::map<std::string, Grid> g = grids();
  std::map<std::string, std::set<std::string>> listed; // op -> kernels the list reaches
  Variants variants;
  for (const Line& l : read_list()) {
    try {
      const Operator& op = find_operator(l.op);
      Problem p = op.parse(parse_kv(l.shape, "--shape"), DType::bf16);
      Config c = op.default_config(p, kArch);
      listed[l.op].insert(kernel_of(c, variants.of(op, p, c)));
    } catch (const Error&) {} // EveryLineParsesAndIsSmall names it
  }
  for (const Operator* op : all_operators()) {
    // The sweep covers the shipped operators, not one another test registered in this process.
    if (operator_origin(op->name()) != "built-in") continue;
    SCOPED_TRACE(op->name());
    ASSERT_TRUE(g.count(op->name())) << "no shape grid for operator " << op->name()
                                     << "; add one here and its lines to " << kList;
    // kernel -> the smallest problem that reaches it (the suggestion for a missing line)
    std::map<std::string, std::pair<double, std::string>> reached;
    for_each_problem(*op, g.at(op->name()), [&](const Problem& p) {
      Config c = op->default_config(p, kArch);
      std::pair<double, std::string> at = {tensor_bytes(*op, p), p.shape_str()};
      auto [it, added] = reached.emplace(kernel_of(c, variants.of(*op, p, c)), at);
      if (!added && at.first < it->second.first) it->second = at;
    });
    EXPECT_FALSE(reached.empty()) << "the grid has no problem the operator accepts";
    for (const auto& [kernel, smallest] : reached)
      EXPECT_TRUE(listed[op->name()].count(kernel))
          << "no line of " << kList << " reaches " << op->name() << " " << kernel
          << "; add one, e.g. '" << op->name() << " | " << smallest.second << " | ...'";
    // A listed kernel the grid misses means the grid no longer spans default_config.
    for (const std::string& kernel : listed[op->name()])
      EXPECT_TRUE(reached.count(kernel))
          << "the list reaches " << kernel << " but the grid does not; widen the grid";
  }
}

} // namespace
