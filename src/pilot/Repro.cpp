// Reproducer folders: writing one from a failing case, and replaying it.
#include "pilot/Repro.h"

#include <cmath>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "ir/IRPrinter.h"
#include "pilot/FaultyOperator.h"
#include "release/Files.h"
#include "release/ReleaseManifest.h"

namespace tp::pilot {

namespace {

const char* kFormat = "tilepilot-repro/1";

std::string describe(const nlohmann::json& r) {
  std::ostringstream os;
  os << (r.value("passed", false) ? "PASS" : "FAIL") << " " << r.value("op", "") << " "
     << r.value("shape", "") << " " << r.value("dtype", "") << " backend=" << r.value("backend", "")
     << " config=" << r.value("config", "") << " seed=" << r.value("seed", uint64_t{0})
     << "\n  max_abs_err=" << r.value("max_abs_err", 0.0)
     << " rel_l2_err=" << r.value("rel_l2_err", 0.0) << " (atol=" << r.value("atol", 0.0)
     << ", rtol=" << r.value("rtol", 0.0) << "), " << r.value("bad_elements", int64_t{0}) << " of "
     << r.value("checked_elements", int64_t{0}) << " checked elements bad, "
     << r.value("blocks_checked", int64_t{0}) << "/" << r.value("blocks_total", int64_t{0})
     << " blocks run";
  if (r.contains("first_bad")) os << "\n  first mismatch: " << r["first_bad"].get<std::string>();
  return os.str();
}

/// The failure record is only printed and compared, but an edited one must still be refused
/// with the file named rather than throw (or overflow) in describe(): every field it reads has
/// its type, and integers fit.
void check_failure_record(const nlohmann::json& f, const std::string& file) {
  auto bad = [&](const char* key, const char* kind) {
    user_error() << file << ": failure." << key << " " << f[key].dump() << " is not " << kind
                 << "; rerun the pilot to write the reproducer again";
  };
  for (const char* k : {"op", "shape", "dtype", "backend", "config", "first_bad"})
    if (f.contains(k) && !f[k].is_string()) bad(k, "a string");
  for (const char* k : {"max_abs_err", "rel_l2_err", "atol", "rtol"})
    if (f.contains(k) && !f[k].is_number()) bad(k, "a number");
  if (f.contains("passed") && !f["passed"].is_boolean()) bad("passed", "true or false");
  if (f.contains("seed") && !f["seed"].is_number_unsigned()) bad("seed", "a non-negative integer");
  for (const char* k : {"bad_elements", "checked_elements", "blocks_checked", "blocks_total"})
    if (f.contains(k)) release::int_from_json(f[k], file, std::string("failure.") + k);
}

} // namespace

ops::CheckResult run_case(const ReproCase& c, const Backends& b) {
  auto op = with_fault(ops::find_operator(c.problem.op), c.fault);
  ops::CheckOptions o;
  o.backend = c.backend;
  o.arch = c.arch;
  o.seed = c.seed;
  o.config = c.config;
  o.atol = c.atol;
  o.rtol = c.rtol;
  o.flop_budget = c.flop_budget;
  ops::check_config(*op, c.problem, c.config, c.arch);
  if (c.backend == "cpu") return ops::check(*op, c.problem, o);
  if (c.backend != "cuda") user_error() << "unknown backend '" << c.backend << "'; use cpu or cuda";
  if (!b.check_cuda)
    user_error() << "this case runs on the cuda backend, which this build does not have; "
                    "replay it on the interpreter with --backend cpu";
  try {
    return b.check_cuda(*op, c.problem, o);
  } catch (const StageSkipped& e) {
    user_error() << "this case runs on the cuda backend, which cannot run here: " << e.what()
                 << "; replay it on the interpreter with --backend cpu";
    throw;
  }
}

nlohmann::json to_json(const ReproCase& c) {
  return {{"problem", release::problem_to_json(c.problem)},
          {"config", c.config},
          {"seed", c.seed},
          {"backend", c.backend},
          {"arch", c.arch},
          {"tolerance", {{"atol", c.atol}, {"rtol", c.rtol}}},
          {"flop_budget", c.flop_budget},
          {"inject_fault", c.fault}};
}

ReproCase repro_case_from_json(const nlohmann::json& j, const std::string& file) {
  try {
    ReproCase c;
    c.problem = release::problem_from_json(j.at("problem"), file);
    c.config = release::config_from_json(j.at("config"), file);
    // Seeds are unsigned: a negative or fractional one would silently replay another input.
    if (!j.at("seed").is_number_unsigned())
      user_error() << file << ": case.seed " << j.at("seed").dump()
                   << " is not a non-negative integer; rerun the pilot that produced it";
    c.seed = j.at("seed").get<uint64_t>();
    c.backend = j.at("backend").get<std::string>();
    c.arch = j.at("arch").get<std::string>();
    c.atol = j.at("tolerance").at("atol").get<double>();
    c.rtol = j.at("tolerance").at("rtol").get<double>();
    c.flop_budget = j.at("flop_budget").get<double>();
    for (auto [name, v] :
         {std::pair{"tolerance.atol", c.atol}, std::pair{"tolerance.rtol", c.rtol}})
      if (!std::isfinite(v) || v < 0)
        user_error() << file << ": case." << name << " " << v
                     << " is not a finite non-negative number; rerun the pilot that produced it";
    if (!std::isfinite(c.flop_budget) || c.flop_budget <= 0)
      user_error() << file << ": case.flop_budget " << c.flop_budget
                   << " is not a positive number; rerun the pilot that produced it";
    c.fault = j.value("inject_fault", "");
    return c;
  } catch (const nlohmann::json::exception& e) {
    user_error() << file << ": malformed reproducer (" << release::plain_error_text(e)
                 << "); rewrite it by rerunning the pilot that produced it";
    throw;
  }
}

void write_repro(const std::string& dir, const ReproCase& c, const ops::CheckResult& failing,
                 const Backends& b, const nlohmann::json& shrink, const std::string& exe,
                 const std::string& final_dir) {
  std::filesystem::create_directories(dir);
  std::string cmd = exe + " repro " + (final_dir.empty() ? dir : final_dir);
  nlohmann::json j;
  j["format"] = kFormat;
  j["case"] = to_json(c);
  j["failure"] = ops::to_json(failing);
  j["shrink"] = shrink;
  j["command"] = cmd;
  release::write_text(dir + "/repro.json", j.dump(2) + "\n");
  release::write_text(dir + "/command.txt", cmd + "\n");

  auto op = with_fault(ops::find_operator(c.problem.op), c.fault);
  const ops::KernelProgram prog = ops::checked_program(*op, c.problem, c.config);
  // A program of several kernels writes each step, headed by its index and name, into each file.
  auto header = [&](size_t s) {
    return prog.steps.size() == 1
               ? std::string()
               : (s ? "\n" : "") + std::string("// ===== step ") + std::to_string(s) + ": " +
                     prog.steps[s].kernel->name + " =====\n";
  };
  std::string ir_text;
  for (size_t s = 0; s < prog.steps.size(); ++s)
    ir_text += header(s) + ir::to_string(prog.steps[s].kernel.node());
  release::write_text(dir + "/kernel.ir.txt", ir_text);

  std::string reason;
  if (!b.compile_only) {
    reason = "this build has no CUDA backend (Backends::compile_only is empty)";
  } else {
    try {
      std::string source, log;
      nlohmann::json resources = nlohmann::json::array();
      for (size_t s = 0; s < prog.steps.size(); ++s) {
        CompileOnlyResult r = b.compile_only(prog.steps[s].kernel, c.arch);
        source += header(s) + r.cuda_source;
        log += header(s) + (r.nvrtc_log.empty() ? "(NVRTC printed nothing)\n" : r.nvrtc_log);
        resources.push_back(r.resources);
      }
      release::write_text(dir + "/kernel.cu.txt", source);
      release::write_text(dir + "/nvrtc.log", log);
      release::write_text(dir + "/resources.json",
                          (prog.steps.size() == 1 ? resources[0] : resources).dump(2) + "\n");
      return;
    } catch (const StageSkipped& e) {
      reason = e.what();
    } catch (const std::exception& e) {
      // A compile failure is a diagnostic worth keeping: the message carries NVRTC's log.
      reason = "compiling for " + c.arch + " failed:\n" + e.what();
    }
  }
  release::write_text(dir + "/kernel.cu.txt", "not produced: " + reason + "\n");
  release::write_text(dir + "/nvrtc.log", "not produced: " + reason + "\n");
  release::write_text(dir + "/resources.json",
                      nlohmann::json{{"not_produced", reason}}.dump(2) + "\n");
}

ReproFile read_repro(const std::string& dir) {
  std::string file = dir + "/repro.json";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(release::read_text(file));
  } catch (const nlohmann::json::exception& e) {
    user_error() << file << " is not valid JSON (" << release::plain_error_text(e)
                 << "); rerun the pilot to write the reproducer again";
  }
  // Compared as JSON: value("format", "") would throw on a format that is not a string.
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormat)
    user_error() << file << ": not a reproducer (format is not " << kFormat
                 << "); pass the repro/ folder that a pilot wrote";
  for (const char* key : {"case", "failure"})
    if (!j.contains(key) || !j[key].is_object())
      user_error() << file << ": the reproducer has no \"" << key
                   << "\" object; rerun the pilot to write the reproducer again";
  ReproFile r;
  r.c = repro_case_from_json(j.at("case"), file);
  r.failure = j.at("failure");
  check_failure_record(r.failure, file);
  r.recorded = describe(r.failure);
  return r;
}

int replay_repro(const std::string& dir, const Backends& b, std::ostream& out,
                 const std::string& backend) {
  ReproFile f = read_repro(dir);
  ReproCase& c = f.c;
  const nlohmann::json& recorded = f.failure;
  if (!backend.empty()) c.backend = backend;
  if (!c.fault.empty())
    out << "note: test-only fault '" << c.fault << "' is injected into this kernel\n";
  out << "recorded: " << f.recorded << "\n";
  ops::CheckResult r = run_case(c, b);
  nlohmann::json now = ops::to_json(r);
  out << "now:      " << describe(now) << "\n";
  if (r.passed) {
    out << "the case now passes\n";
    return 0;
  }
  bool same = recorded.value("first_bad", "") == now.value("first_bad", "") &&
              recorded.value("bad_elements", int64_t{-1}) == now.value("bad_elements", int64_t{-2});
  out << (same ? "the case still fails, with the same failure\n"
               : "the case still fails, differently from the recorded failure\n");
  return 1;
}

} // namespace tp::pilot
