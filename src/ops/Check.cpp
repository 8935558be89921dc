// The correctness check.
#include "ops/Check.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "ops/HostProgram.h"
#include "ops/MemoryCheck.h"

namespace tp::ops {

namespace {

std::vector<std::array<int64_t, 3>> choose_blocks(const std::array<int64_t, 3>& g, double flops,
                                                  double budget, uint64_t seed) {
  int64_t total = g[0] * g[1] * g[2];
  double per_block = flops / static_cast<double>(total);
  int64_t want =
      budget >= flops ? total : std::max<int64_t>(2, static_cast<int64_t>(budget / per_block));
  std::vector<std::array<int64_t, 3>> out;
  auto at = [&](int64_t i) {
    return std::array<int64_t, 3>{i % g[0], (i / g[0]) % g[1], i / (g[0] * g[1])};
  };
  if (want >= total) {
    for (int64_t i = 0; i < total; ++i)
      out.push_back(at(i));
    return out;
  }
  // Always the first and the last block (the ragged edges), then a seeded random sample.
  std::set<int64_t> pick = {0, total - 1};
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::uniform_int_distribution<int64_t> d(0, total - 1);
  while (static_cast<int64_t>(pick.size()) < want)
    pick.insert(d(rng));
  for (int64_t i : pick)
    out.push_back(at(i));
  return out;
}

std::string index_str(const std::vector<int64_t>& idx) {
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i)
    s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

/// op.reference for each box, on up to hardware_concurrency threads; the first exception any
/// of them throws is rethrown here once all have stopped.
std::vector<std::vector<double>> references(const Operator& op, const Problem& p,
                                            const std::vector<HostTensor>& args,
                                            const std::vector<Box>& boxes) {
  std::vector<std::vector<double>> refs(boxes.size());
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex m;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < boxes.size();) {
      try {
        refs[i] = op.reference(p, args, boxes[i]);
      } catch (...) {
        std::lock_guard<std::mutex> l(m);
        if (!error) error = std::current_exception();
        next = boxes.size();
      }
    }
  };
  const size_t threads =
      std::min<size_t>(boxes.size(), std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t)
      pool.emplace_back(worker);
    for (auto& t : pool)
      t.join();
  }
  if (error) std::rethrow_exception(error);
  return refs;
}

} // namespace

std::pair<double, double> default_tolerance(const Operator& op, const Problem& p) {
  auto [atol, rtol] = op.tolerance(p.dtype);
  if (p.dtype == DType::f32) {
    double scale = std::sqrt(std::max(1.0, static_cast<double>(op.reduction_length(p)) / 256.0));
    atol *= scale;
    rtol *= scale;
  }
  return {atol, rtol};
}

CheckResult check(const Operator& op, const Problem& p, const CheckOptions& o) {
  return check_program_with(op, p, o,
                            [](const KernelProgram& prog, std::vector<HostTensor>& args,
                               const std::vector<std::array<int64_t, 3>>& blocks) {
                              std::vector<HostTensor*> ptrs;
                              for (auto& a : args)
                                ptrs.push_back(&a);
                              interpret_program(prog, ptrs, blocks);
                            });
}

CheckResult check_with(const Operator& op, const Problem& p, const CheckOptions& o,
                       const BlockRunner& run) {
  return check_program_with(op, p, o,
                            [&](const KernelProgram& prog, std::vector<HostTensor>& args,
                                const std::vector<std::array<int64_t, 3>>& blocks) {
                              if (prog.steps.size() != 1)
                                user_error() << op.name() << " runs " << prog.steps.size()
                                             << " kernels per call; this check runs one kernel "
                                             << "(check the program instead)";
                              run(prog.steps[0].kernel, args, blocks);
                            });
}

CheckResult check_program_with(const Operator& op, const Problem& p, const CheckOptions& o,
                               const ProgramRunner& run) {
  auto t0 = std::chrono::steady_clock::now();
  CheckResult r;
  r.op = op.name();
  r.problem = p;
  r.backend = o.backend;
  r.seed = o.seed;
  r.config = o.config.empty() ? op.default_config(p, o.arch) : o.config;
  auto [atol, rtol] = default_tolerance(op, p);
  r.atol = o.atol >= 0 ? o.atol : atol;
  r.rtol = o.rtol >= 0 ? o.rtol : rtol;

  // Before anything is allocated: a problem too large for this host is bad input.
  require_memory(op, p, "check");
  check_config(op, p, r.config, o.arch);
  const KernelProgram prog = checked_program(op, p, r.config);
  if (!prog.intermediates.empty()) require_memory(op, p, "check", 0, intermediate_bytes(prog));
  std::vector<HostTensor> args = op.make_args(p, o.seed);
  std::array<int64_t, 3> g = op.grid(p, r.config);
  r.blocks_total = g[0] * g[1] * g[2];
  // The interpreter runs only the sampled blocks; the GPU runs the whole grid and the fp64 CPU
  // reference is computed for a sample of its blocks (plus a NaN scan of every output below).
  double budget = o.backend == "cpu" ? o.flop_budget : o.reference_budget;
  // A reference element costs more than its flops for memory-bound operators (indexing,
  // decoding, a transcendental): the work counted is at least kRefCostPerElement per output
  // element, so that a check of a billion-element element-wise problem samples too.
  constexpr double kRefCostPerElement = 20;
  double out_elements = 0;
  const std::vector<ArgSpec> specs = op.arg_specs(p);
  for (int i : op.outputs(p)) {
    double n = 1;
    for (int64_t e : specs.at(i).shape)
      n *= static_cast<double>(e);
    out_elements += n;
  }
  const double work = std::max(op.flops(p), kRefCostPerElement * out_elements);
  std::vector<std::array<int64_t, 3>> blocks = choose_blocks(g, work, budget, o.seed);
  r.blocks_run = static_cast<int64_t>(blocks.size());
  run(prog, args, o.backend == "cpu" ? blocks : std::vector<std::array<int64_t, 3>>{});

  // The fp64 reference of every sampled box, computed on all cores (an operator's reference
  // reads its inputs only; docs/operators.md states that it must be safe to call concurrently),
  // then compared in block order, so the first mismatch reported does not depend on timing.
  std::vector<Box> boxes;
  for (const auto& blk : blocks)
    for (const Box& box : op.block_outputs(p, r.config, blk))
      boxes.push_back(box);
  const std::vector<std::vector<double>> refs = references(op, p, args, boxes);
  double err2 = 0, ref2 = 0;
  for (size_t b = 0; b < boxes.size(); ++b) {
    const Box& box = boxes[b];
    const std::vector<double>& ref = refs[b];
    const HostTensor& out = args[box.tensor];
    std::vector<int64_t> e(box.extent.size(), 0);
    for (size_t n = 0; n < ref.size(); ++n) {
      int64_t flat = 0;
      std::vector<int64_t> idx(e.size());
      for (size_t d = 0; d < e.size(); ++d) {
        idx[d] = box.min[d] + e[d];
        flat = flat * out.shape()[d] + idx[d];
      }
      double got = out.get(flat), want = ref[n];
      ++r.checked;
      bool ok;
      if (std::isinf(want)) {
        ok = got == want; // e.g. the log-sum-exp of a row with no visible key
      } else if (!std::isfinite(got)) {
        ok = false;
        ++r.nonfinite;
      } else {
        double diff = std::fabs(got - want);
        r.max_abs_err = std::max(r.max_abs_err, diff);
        err2 += diff * diff;
        ref2 += want * want;
        ok = diff <= r.atol + r.rtol * std::fabs(want);
      }
      if (!ok) {
        if (r.bad == 0) {
          std::ostringstream os;
          os << "output " << box.tensor << " at " << index_str(idx) << ": got " << got
             << ", expected " << want;
          r.first_bad = os.str();
        }
        ++r.bad;
      }
      for (int d = static_cast<int>(e.size()) - 1; d >= 0; --d) {
        if (++e[d] < box.extent[d]) break;
        e[d] = 0;
      }
    }
  }
  if (o.backend != "cpu") {
    // Every output element the kernel should have written: NaN (the poison) never passes.
    for (int t : op.outputs(p)) {
      const HostTensor& out = args[t];
      for (int64_t i = 0; i < out.numel(); ++i)
        if (std::isnan(out.get(i))) {
          if (r.bad == 0)
            r.first_bad = "output " + std::to_string(t) + " flat index " + std::to_string(i) +
                          " is NaN (unwritten or computed NaN)";
          ++r.bad;
          ++r.nonfinite;
        }
    }
  }
  r.rel_l2_err = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  r.passed = r.bad == 0 && r.checked > 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

nlohmann::json to_json(const CheckResult& r) {
  nlohmann::json j;
  j["op"] = r.op;
  j["shape"] = r.problem.shape_str();
  j["dtype"] = dtype_name(r.problem.dtype);
  j["backend"] = r.backend;
  j["config"] = config_str(r.config);
  j["seed"] = r.seed;
  j["max_abs_err"] = r.max_abs_err;
  j["rel_l2_err"] = r.rel_l2_err;
  j["atol"] = r.atol;
  j["rtol"] = r.rtol;
  j["passed"] = r.passed;
  j["checked_elements"] = r.checked;
  j["bad_elements"] = r.bad;
  j["nonfinite_elements"] = r.nonfinite;
  j["blocks_checked"] = r.blocks_run;
  j["blocks_total"] = r.blocks_total;
  if (!r.first_bad.empty()) j["first_bad"] = r.first_bad;
  j["seconds"] = r.seconds;
  return j;
}

} // namespace tp::ops
