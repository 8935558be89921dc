// `tilepilot tune OP --shape k=v,... [--dtype] [--arch] [--space k=v1|v2,...] [--budget-seconds N]
//  [--config-timeout S] [--dry-run] [--no-store] [--json]`
// `tilepilot tune --spec FILE [...]`: every shape of a pilot spec, see TuneSpec.h.
//
// Prints the pruned config space (counts and reasons), then tunes through the registered backend
// hooks (tp::autotune::set_default_hooks) and stores the winner in the tuning database.
// Exit status: 0 tuned (or --dry-run); 1 tuning ran but no candidate was correct; 2 bad input,
// or "not run: measurement needs an <arch> GPU (<reason>)" on a machine that cannot measure
// (after a compile check of every candidate when a compile hook is registered).
#include <cmath>
#include <iostream>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "TuneShared.h"
#include "TuneSpec.h"
#include "autotune/Policy.h"
#include "tilepilot/runtime.h"

namespace tp::cli {

namespace {

using namespace tp::autotune;

struct Args {
  std::string op, shape, dtype = "bf16", arch, space;
  double budget = 0, config_timeout = 60;
  bool json = false, dry_run = false, no_store = false, compile_check = false;
};

std::string kb(int64_t bytes) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << static_cast<double>(bytes) / 1024.0 << " KB";
  return s.str();
}

nlohmann::json space_json(const ConfigSpace& s) {
  nlohmann::json j = {{"total", s.total()},
                      {"kept", s.kept.size()},
                      {"pruned", s.pruned.size()},
                      {"pruned_by_category", s.pruned_by_category()}};
  j["kept_configs"] = nlohmann::json::array();
  for (const Candidate& c : s.kept)
    j["kept_configs"].push_back(
        {{"config", c.config}, {"smem_bytes_est", c.smem_bytes}, {"acc_regs_est", c.acc_regs}});
  j["pruned_configs"] = nlohmann::json::array();
  for (const Candidate& c : s.pruned)
    j["pruned_configs"].push_back(
        {{"config", c.config}, {"category", c.category}, {"reason", c.reason}});
  return j;
}

void print_space(const ConfigSpace& s, const TargetLimits& t) {
  std::cout << "space: " << s.total() << " configs, " << s.kept.size() << " kept, "
            << s.pruned.size() << " pruned before compiling";
  std::string sep = " (";
  for (const auto& [cat, n] : s.pruned_by_category()) {
    std::cout << sep << cat << " " << n;
    sep = ", ";
  }
  std::cout << (s.pruned.empty() ? "" : ")") << "; limits on " << t.arch << ": "
            << kb(t.max_smem_bytes) << " shared memory per block, " << t.sm_count << " SMs\n";
  // A few examples per category: enough to see each rule at work without a wall of text.
  std::map<std::string, int> shown;
  for (const Candidate& c : s.pruned)
    if (shown[c.category]++ < 3)
      std::cout << "  pruned " << ops::config_str(c.config) << ": " << c.reason << "\n";
  const size_t top = std::min<size_t>(s.kept.size(), 10);
  if (top) std::cout << "search order (first " << top << " of " << s.kept.size() << "):\n";
  for (size_t i = 0; i < top; ++i)
    std::cout << "  " << i + 1 << ". " << ops::config_str(s.kept[i].config) << "  smem "
              << kb(s.kept[i].smem_bytes) << ", acc " << s.kept[i].acc_regs << " regs/thread\n";
}

void print_result(const TuneResult& r) {
  std::cout << "candidates:";
  for (const auto& [st, n] : r.status_counts())
    std::cout << " " << st << " " << n;
  std::cout << " (" << r.wall_s << " s)\n";
  for (const CandidateLog& c : r.log)
    if (c.status != CandidateStatus::pruned && c.status != CandidateStatus::compiled &&
        c.status != CandidateStatus::measured && c.status != CandidateStatus::best)
      std::cout << "  " << status_name(c.status) << " " << ops::config_str(c.config) << ": "
                << c.reason << "\n";
}

void run_tune(const Args& a, int* rc) {
  const ops::Operator& op = ops::find_operator(a.op);
  ops::Problem p = op.parse(ops::parse_kv(a.shape, "--shape"), parse_dtype_or_fail(a.dtype));

  std::string no_gpu;
  std::optional<rt::DeviceInfo> dev = rt::device_info(0, &no_gpu);
  if (dev && !a.arch.empty() && a.arch != dev->arch && !a.dry_run)
    user_error() << "tune: --arch " << a.arch << " does not match GPU 0 (" << dev->name << ", "
                 << dev->arch << "); tuning measures on the GPU, so drop --arch or use --dry-run";
  const std::string arch = !a.arch.empty() ? a.arch : dev ? dev->arch : "sm_90a";
  const bool on_device = dev && dev->arch == arch;
  TargetLimits limits = on_device ? TargetLimits::for_device(*dev) : TargetLimits::for_arch(arch);

  std::vector<ops::Knob> knobs = knob_space(op, arch);
  if (!a.space.empty()) knobs = restrict_space(knobs, a.space);
  ConfigSpace space = enumerate(op, p, limits, knobs);

  nlohmann::json j = {{"op", op.name()},
                      {"shape", p.shape_str()},
                      {"dtype", dtype_name(p.dtype)},
                      {"arch", arch},
                      {"device", on_device ? dev->name : "none"},
                      {"space", space_json(space)}};
  if (!a.json) {
    std::cout << "tune " << op.name() << " " << p.shape_str() << " " << dtype_name(p.dtype)
              << " for " << arch << (on_device ? " on " + dev->name : "") << "\n";
    print_space(space, limits);
  }
  auto finish = [&](const std::string& status, const std::string& reason, int code) {
    j["status"] = status;
    if (!reason.empty()) j["reason"] = reason;
    if (a.json)
      std::cout << j.dump(2) << "\n";
    else if (!reason.empty())
      std::cout << reason << "\n";
    *rc = code;
  };
  if (a.dry_run) return finish("dry_run", "", 0);

  std::optional<TuneHooks> hooks = default_hooks(op, p, arch);
  TuneOptions o;
  o.budget_seconds = a.budget;
  o.per_config_seconds = a.config_timeout;
  o.label = op.name() + " " + p.shape_str();
  o.progress = a.json ? TuneOptions::Progress::off : TuneOptions::Progress::automatic;
  if (!on_device || !hooks || !hooks->measure) {
    std::string why = !on_device ? (dev ? "GPU 0 is " + dev->arch : no_gpu)
                      : !hooks   ? "no tuning backend is registered in this build"
                                 : hooks->why_no_measure;
    if (why.empty()) why = "the backend registered no measure hook";
    // Said before anything is compiled; compiling every candidate without a GPU to measure
    // them on is opt-in (--compile-check).
    if (!a.json) std::cout << "not run: measurement needs an " << arch << " GPU (" << why << ")\n";
    if (a.compile_check && hooks && hooks->compile && !space.kept.empty()) {
      TuneHooks compile_only = *hooks;
      compile_only.measure = nullptr;
      TuneResult r = tune(space, compile_only, o);
      j["compile_check"] = to_json(r);
      if (!a.json) print_result(r);
    }
    if (!a.compile_check && !a.json)
      std::cout << "(pass --compile-check to compile every kept candidate anyway)\n";
    j["status"] = "not_run";
    j["reason"] = "not run: measurement needs an " + arch + " GPU (" + why + ")";
    if (a.json) std::cout << j.dump(2) << "\n";
    *rc = 2;
    return;
  }
  if (space.kept.empty())
    return finish("no_candidate", "no config survives pruning; widen --space", 1);

  j["devices"] = hooks->devices;
  if (!a.json && !hooks->devices_note.empty()) std::cout << hooks->devices_note << "\n";
  TuneResult r = tune(space, *hooks, o);
  j["result"] = to_json(r);
  if (!a.json) print_result(r);
  if (r.device_fault) {
    // The log shows the faulted candidate and the skipped rest; nothing is stored, and the
    // fault's own message and exit status (main.cpp) end the command.
    j["status"] = "device_fault";
    if (a.json) std::cout << j.dump(2) << "\n";
    rethrow_device_fault(r);
  }
  if (!r.found) return finish("no_candidate", "no candidate was correct and measured", 1);
  const ops::Config dflt = op.default_config(p, arch);
  const double dflt_ms = full_median_ms(r, dflt);
  const double best_ms = r.best_measurement.median_ms();
  j["best"] = {{"config", r.best},
               {"ms_median", best_ms},
               {"default_ms_median", dflt_ms},
               {"tflops", op.flops(p) / (best_ms * 1e-3) / 1e12}};
  if (!a.no_store) j["stored"] = store_winner(p, *dev, r, dflt, "tilepilot tune");
  if (!a.json) {
    std::cout << "best " << ops::config_str(r.best) << ": " << best_ms << " ms";
    if (dflt_ms > 0) std::cout << " (default " << dflt_ms << " ms, x" << dflt_ms / best_ms << ")";
    std::cout << "\n";
    if (j.contains("stored")) std::cout << "stored in " << j["stored"].get<std::string>() << "\n";
  }
  finish("tuned", "", 0);
}

} // namespace

void add_tune_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("tune", "search an operator's config space on the GPU");
  auto a = std::make_shared<Args>();
  auto sp = std::make_shared<TuneSpecArgs>();
  auto* op = cmd->add_option("op", a->op, "operator (see `tilepilot ops`)");
  auto* shape = cmd->add_option("--shape", a->shape, "problem, e.g. M=4096,N=4096,K=4096");
  cmd->add_option("--spec", sp->spec,
                  "tune every shape of a pilot spec instead (per-shape budget, default 30 s), "
                  "then time each winner side by side with the default")
      ->excludes(op)
      ->excludes(shape);
  cmd->add_option("--dtype", a->dtype, "bf16 | f16 | f32");
  cmd->add_option("--arch", a->arch, "target arch for pruning (default: GPU 0, else sm_90a)");
  cmd->add_option("--space", a->space, "knob values to search, e.g. bm=64|128,stages=3|4");
  cmd->add_option("--budget-seconds", a->budget,
                  "stop starting candidates after this long (with --spec: per shape)");
  cmd->add_option("--config-timeout", a->config_timeout,
                  "seconds allowed to compile, and to measure, one config (default 60)");
  cmd->add_option("--pinned-out", sp->pinned_out,
                  "with --spec: write the winners that beat the default by --min-gain as a "
                  "pinned table (JSON)");
  cmd->add_option("--min-gain", sp->min_gain,
                  "with --spec: fraction faster than the default a winner must be, side by side, "
                  "to be pinned (default 0.02)");
  cmd->add_flag("--dry-run", a->dry_run, "print the pruned space and exit 0");
  cmd->add_flag("--no-store", a->no_store, "do not write the result to the tuning database");
  cmd->add_flag("--compile-check", a->compile_check,
                "without a GPU to measure on: compile every kept candidate with NVRTC anyway");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->callback([a, sp, cmd, rc] {
    // Numbers are checked before anything is enumerated or compiled.
    if (!std::isfinite(a->budget) || a->budget < 0)
      user_error() << "tune: --budget-seconds " << a->budget << " must be a finite number >= 0";
    if (!std::isfinite(a->config_timeout) || a->config_timeout <= 0)
      user_error() << "tune: --config-timeout " << a->config_timeout
                   << " must be a finite number > 0 (seconds)";
    if (!std::isfinite(sp->min_gain) || sp->min_gain < 0)
      user_error() << "tune: --min-gain " << sp->min_gain
                   << " must be a finite fraction >= 0, e.g. 0.02 for 2 %";
    if (sp->spec.empty()) {
      if (a->op.empty() || a->shape.empty())
        user_error() << "tune: give an operator and --shape (e.g. tune OP --shape k=v,...; "
                        "`tilepilot ops` lists operators and keys), or --spec FILE to tune a "
                        "pilot spec's shapes";
      if (!sp->pinned_out.empty() || cmd->count("--min-gain"))
        user_error() << "tune: --pinned-out and --min-gain go with --spec";
      return run_tune(*a, rc);
    }
    if (cmd->count("--dtype") || cmd->count("--arch"))
      user_error() << "tune --spec: the spec sets the dtypes and the device; drop --dtype/--arch";
    if (cmd->count("--budget-seconds")) sp->budget_per_shape = a->budget;
    sp->space = a->space;
    sp->config_timeout = a->config_timeout;
    sp->json = a->json;
    sp->dry_run = a->dry_run;
    sp->no_store = a->no_store;
    run_tune_spec(*sp, rc);
  });
}

} // namespace tp::cli
