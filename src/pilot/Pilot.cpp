// The pilot driver: builds the case list, probes the device, runs the stages in order and
// writes the reports.
#include "pilot/Pilot.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>

#include "ops/MemoryCheck.h"
#include "pilot/FaultyOperator.h"
#include "pilot/OutputDir.h"
#include "pilot/PilotRun.h"
#include "pilot/Report.h"
#include "release/Files.h"
#include "runtime/BuildInfo.h"
#include "runtime/Environment.h"
#include "tilepilot/device_error.h"

namespace tp::pilot {

namespace fs = std::filesystem;

namespace {

/// splitmix64: a case's seed is a well-mixed function of the spec seed and the case index, so
/// neighbouring cases and neighbouring spec seeds do not share inputs.
uint64_t case_seed(uint64_t spec_seed, uint64_t index) {
  uint64_t z = spec_seed + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) & 0xffffffffull; // 32 bits: short enough to type on a command line
}

std::string mask_of(const ops::Problem& p) {
  return ops::find_operator(p.op).variant_label(p);
}

bool progress_enabled(ProgressMode m) {
  return m == ProgressMode::on || (m == ProgressMode::automatic && Progress::stderr_is_tty());
}

} // namespace

std::string now_iso8601() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms.count()));
  return out;
}

PilotRun::PilotRun(const PilotSpec& s, const PilotOptions& o)
    : spec(s), opt(o), op(with_fault(ops::find_operator(s.op), s.inject_fault)),
      progress(progress_enabled(o.progress)) {
  int index = 0;
  for (const auto* list : {&spec.representative, &spec.edge})
    for (const ShapeEntry& e : *list)
      for (DType t : spec.dtypes) {
        Case c;
        c.index = index;
        c.shape = &e;
        c.problem = e.problem(spec.op, t);
        c.seed = case_seed(spec.seed, static_cast<uint64_t>(index));
        c.label = std::string(e.representative ? "rep " : "edge ") + dtype_name(t) + " " +
                  c.problem.shape_str();
        c.mask = mask_of(c.problem);
        cases.push_back(c);
        ++index;
      }
}

ops::Config PilotRun::config_for(const Case& c) const {
  if (auto it = tuned.find(c.index); it != tuned.end()) return it->second;
  // The target's config even on the interpreter: the kernel under test is the one that ships.
  return pinned_config(*op, c.problem, spec.device, spec.config);
}

const StageRecord* PilotRun::stage(const std::string& name) const {
  for (const auto& s : stages)
    if (s.name == name) return &s;
  return nullptr;
}

void PilotRun::run_stage(const std::string& name,
                         const std::function<std::string(nlohmann::json&)>& body) {
  StageRecord rec;
  rec.name = name;
  rec.started = now_iso8601();
  auto t0 = std::chrono::steady_clock::now();
  progress.stage(name);
  try {
    rec.status = body(rec.data);
  } catch (const StageSkipped& e) {
    rec.status = std::string("not run: ") + e.what();
  } catch (const DeviceFault&) {
    // The context is lost, so later stages would fail too: the run ends, and the output folder
    // keeps its earlier contents (run() abandons the hidden one it was writing).
    throw;
  } catch (const std::bad_alloc&) {
    // The machine, not the kernel: recorded as a stage error, which the decision never reads
    // as a measured "no".
    rec.status = "failed";
    rec.data["error"] = "out of host memory (a stage error, not a kernel failure); run the "
                        "pilot on a machine with more memory or use smaller shapes";
    rec.data["stage_error"] = true;
  } catch (const std::exception& e) {
    rec.status = "failed";
    rec.data["error"] = e.what();
  }
  progress.done();
  rec.finished = now_iso8601();
  rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  internal_assert(rec.passed() || rec.failed() || rec.status.rfind("not run: ", 0) == 0)
      << "stage " << name << " has status '" << rec.status << "'";
  stages.push_back(std::move(rec));
}

std::string PilotRun::gpu_unavailable(const std::string& hook_name, bool hook_present) const {
  if (!on_device) return "not run: " + no_device;
  if (!hook_present)
    return "not run: this build has no " + hook_name + " backend (Backends::" + hook_name + ")";
  return "";
}

std::string PilotRun::blocked(const std::string& metric, const std::string& hook_name,
                              bool hook_present) const {
  if (!metric.empty() && !spec.wants(metric))
    return "not run: " + metric + " is not in the spec's metrics";
  if (const StageRecord* c = stage("correctness"); !c || !c->passed())
    return "not run: correctness did not pass (breadth before speed)";
  return gpu_unavailable(hook_name, hook_present);
}

const StageRecord* PilotResult::stage(const std::string& name) const {
  for (const auto& s : stages)
    if (s.name == name) return &s;
  return nullptr;
}

void stage_environment(PilotRun& r) {
  r.run_stage("environment", [&](nlohmann::json& d) {
    rt::EnvironmentInfo env = rt::capture_environment();
    d["environment"] = rt::to_json(env);
    d["tilepilot"] = {{"version", TILEPILOT_VERSION}, {"git_commit", rt::build_git_commit()}};
    std::string why;
    r.device = r.opt.backends.device ? r.opt.backends.device(&why) : std::nullopt;
    if (!r.opt.backends.device) why = "no device probe in this build";
    if (r.device && r.device->arch == r.spec.device) {
      r.on_device = true;
    } else if (r.device) {
      r.no_device = "no " + r.spec.device + " device (device 0 is " + r.device->name + ", " +
                    r.device->arch + ")";
    } else {
      r.no_device = "no " + r.spec.device + " device (" + why + ")";
    }
    d["target_device"] = {{"arch", r.spec.device}, {"present", r.on_device}};
    if (r.device) d["target_device"]["device"] = rt::to_json(*r.device);
    if (!r.on_device) d["target_device"]["reason"] = r.no_device;
    d["spec"] = to_json(r.spec);
    d["spec_text"] = r.spec.text;
    if (!r.spec.inject_fault.empty())
      d["inject_fault"] = r.spec.inject_fault + " (test-only: the kernel is deliberately broken)";
    return "passed";
  });
}

PilotResult run_pilot(const PilotSpec& spec, const PilotOptions& o) {
  // Inputs are checked before any stage runs or any file is touched.
  if (!(o.cpu_flop_budget > 0) || !std::isfinite(o.cpu_flop_budget))
    user_error() << "--flop-budget must be a positive finite number; the default is 3e8";
  if (o.shrink_attempts < 0) user_error() << "--shrink-attempts must not be negative";
  const ops::Operator& base = ops::find_operator(spec.op);
  for (const auto* list : {&spec.representative, &spec.edge})
    for (const ShapeEntry& e : *list)
      for (DType t : spec.dtypes)
        ops::require_memory(base, e.problem(spec.op, t),
                            spec.file + ":" + std::to_string(e.line) + ": pilot");
  OutputDir out = prepare_output_dir(o.out_dir, o.force);
  try {
    PilotRun r(spec, o);
    r.write_dir = out.staging_dir;
    r.final_dir = o.out_dir;
    stage_environment(r);
    stage_correctness(r);
    stage_compile(r);
    stage_warm(r);
    stage_memory(r);
    stage_model(r);
    stage_autotune(r);
    stage_fallback(r);
    std::string decision = stage_decision(r);
    stage_release(r, decision);

    PilotResult res;
    res.decision = decision;
    res.report = build_report(r, decision);
    release::write_text(r.write_dir + "/report.json", res.report.dump(2) + "\n");
    release::write_text(r.write_dir + "/report.md", report_markdown(res.report));
    release::write_text(r.write_dir + "/report.html", report_html(res.report));
    commit_output_dir(out);
    for (const auto& s : r.stages)
      if (s.failed()) res.exit_code = 1;
    res.stages = std::move(r.stages);
    return res;
  } catch (...) {
    abandon_output_dir(out);
    throw;
  }
}

std::string default_out_dir(const std::string& spec_file) {
  return "pilot-out/" + fs::path(spec_file).stem().string();
}

} // namespace tp::pilot
