// The pilot's last stage: the release folder when the decision is "release" (see
// ReleaseManifest.h for its layout), the "keep framework operator" record (keep-framework.md
// and .json, with the measured numbers that say why) when it is not, nothing when undecided.
#include <filesystem>
#include <sstream>

#include "ir/IRPrinter.h"
#include "pilot/PilotRun.h"
#include "release/Files.h"
#include "release/ReleaseManifest.h"
#include "runtime/Environment.h"

namespace tp::pilot {

namespace {

std::string default_fallback(const std::string& op) {
  return ops::find_operator(op).framework_name();
}

nlohmann::json stage_data(const PilotRun& r, const std::string& name) {
  const StageRecord* s = r.stage(name);
  return s ? s->data : nlohmann::json();
}

/// Generated source and cubin of a kernel, from the compile stage or compiled now.
std::optional<CompileOnlyResult> kernel_bytes(PilotRun& r, const std::string& hash, const Kernel& k,
                                              std::string* why_not) {
  if (auto it = r.compiled.find(hash); it != r.compiled.end()) return it->second;
  if (!r.opt.backends.compile_only) {
    *why_not = "this build has no CUDA backend (Backends::compile_only)";
    return std::nullopt;
  }
  CompileOnlyResult c = r.opt.backends.compile_only(k, r.spec.device);
  r.compiled[hash] = c;
  return c;
}

/// A case's line in test_matrix.json: every tested case, whichever implementation serves it.
void append_matrix_case(const PilotRun& r, const Case& c, const WarmTiming* w,
                        nlohmann::json& cases) {
  nlohmann::json m = {{"problem", release::problem_to_json(c.problem)},
                      {"kind", c.representative() ? "representative" : "edge"},
                      {"mask", c.mask},
                      {"correctness", ops::to_json(r.checks[c.index])}};
  if (w) m["warm"] = warm_json(r, c, *w);
  if (auto f = r.fallback.find(c.index); f != r.fallback.end())
    m["fallback"] = {{"name", f->second.name}, {"passed", f->second.passed}};
  cases.push_back(m);
}

void write_release(PilotRun& r, nlohmann::json& d) {
  std::string dir = r.write_dir + "/release";
  std::map<std::string, std::string> files; // relative path -> bytes
  nlohmann::json pinned = {{"entries", nlohmann::json::array()}};
  if (r.spec.route == "per_shape") pinned["framework_routed"] = nlohmann::json::array();
  nlohmann::json cases = nlohmann::json::array();
  std::vector<std::string> not_produced;
  const std::map<int, WarmTiming> best = best_timings(r); // tuned where adopted
  for (const Case& c : r.cases) {
    auto bt = best.find(c.index);
    const WarmTiming* w = bt == best.end() ? nullptr : &bt->second;
    append_matrix_case(r, c, w, cases);
    if (r.spec.route == "per_shape" && !(w && routes_to_kernel(r, *w))) {
      // Tested, and measured slower than the framework: dispatch sends it there.
      nlohmann::json f = {{"problem", release::problem_to_json(c.problem)},
                          {"kind", c.representative() ? "representative" : "edge"}};
      if (w) f["warm"] = warm_json(r, c, *w);
      pinned["framework_routed"].push_back(f);
      continue;
    }
    ops::Config cfg = r.config_for(c);
    const ops::KernelProgram prog = ops::checked_program(*r.op, c.problem, cfg);
    nlohmann::json e = {{"problem", release::problem_to_json(c.problem)},
                        {"config", cfg},
                        {"kind", c.representative() ? "representative" : "edge"}};
    // A program of several kernels lists each step's files under "steps"; source and cubin
    // name the last step's, the one that writes the outputs.
    if (prog.steps.size() > 1) e["steps"] = nlohmann::json::array();
    for (const ops::KernelStep& s : prog.steps) {
      const Kernel& k = s.kernel;
      std::string hash = kernel_ir_hash(k);
      std::string stem = "kernels/" + k->name + "_" + hash.substr(0, 8);
      nlohmann::json step = {{"kernel", k->name}, {"args", s.args}};
      std::string why;
      if (auto bytes = kernel_bytes(r, hash, k, &why)) {
        files[stem + ".cu"] = bytes->cuda_source;
        files[stem + ".cubin"] = bytes->cubin;
        step["source"] = stem + ".cu";
        step["cubin"] = stem + ".cubin";
        step["resources"] = bytes->resources;
      } else {
        step["kernel_bytes"] = "not produced: " + why;
        if (&s == &prog.steps.back()) not_produced.push_back(c.label + ": " + why);
      }
      if (e.contains("steps")) e["steps"].push_back(step);
      if (&s == &prog.steps.back())
        for (const char* key : {"source", "cubin", "resources", "kernel_bytes"})
          if (step.contains(key)) e[key] = step[key];
    }
    if (w) e["warm"] = warm_json(r, c, *w);
    pinned["entries"].push_back(e);
  }
  nlohmann::json dev = {{"cases", cases}};
  if (r.device) dev["device"] = rt::to_json(*r.device);
  std::string fb_name =
      r.fallback.empty() ? default_fallback(r.spec.op) : r.fallback.begin()->second.name;
  nlohmann::json fallback = {
      {"operator", fb_name},
      {"policy", r.spec.fallback},
      {"tested", stage_data(r, "fallback").value("cases", nlohmann::json::array())},
      {"reasons",
       {"the device is not " + r.spec.device, "the dtype is not in the tested matrix",
        "the shape is not in the tested matrix", "a tested shape failed its test",
        "the release folder fails its hash check",
        "the pilot measured the framework faster at this shape (objective.route: per_shape)",
        "the pinned kernel does not load (driver, cubin or arch mismatch)"}}};
  files["pinned.json"] = pinned.dump(2) + "\n";
  files["test_matrix.json"] =
      nlohmann::json{{"operator", r.spec.op}, {"devices", {{r.spec.device, dev}}}}.dump(2) + "\n";
  files["fallback.json"] = fallback.dump(2) + "\n";
  files["spec.yaml"] = r.spec.text;

  std::filesystem::remove_all(dir);
  nlohmann::json manifest = {{"format", release::kReleaseFormat},
                             {"operator", r.spec.op},
                             {"device", r.spec.device},
                             {"created", now_iso8601()},
                             {"tilepilot", stage_data(r, "environment")["tilepilot"]},
                             {"environment", stage_data(r, "environment")["environment"]},
                             {"spec", to_json(r.spec)},
                             {"decision", stage_data(r, "decision")},
                             {"files", nlohmann::json::object()}};
  for (const auto& [path, bytes] : files) {
    release::write_text(dir + "/" + path, bytes);
    manifest["files"][path] = {{"xxh64", release::xxh64_hex(bytes)}, {"bytes", bytes.size()}};
  }
  manifest["files_xxh64"] = release::file_list_hash(manifest["files"]);
  release::write_text(dir + "/manifest.json", manifest.dump(2) + "\n");
  d["kind"] = "release";
  d["dir"] = r.final_dir + "/release";
  d["pinned"] = pinned["entries"].size();
  if (pinned.contains("framework_routed"))
    d["framework_routed"] = pinned["framework_routed"].size();
  if (!not_produced.empty()) d["kernel_bytes_not_produced"] = not_produced;
}

void write_keep_framework(PilotRun& r, nlohmann::json& d) {
  nlohmann::json dec = stage_data(r, "decision");
  nlohmann::json j = {{"decision", kKeepFramework},
                      {"operator", r.spec.op},
                      {"device", r.spec.device},
                      {"fallback", default_fallback(r.spec.op)},
                      {"reasons", dec["reasons"]},
                      {"objective", dec["objective"]},
                      {"model_evidence", dec["model_evidence"]}};
  for (const char* s : {"warm", "memory", "autotune", "fallback"})
    if (r.stage(s)->ran()) j["measured"][s] = stage_data(r, s);
  nlohmann::json corr = stage_data(r, "correctness");
  if (corr.contains("repro")) j["correctness_failure"] = corr["repro"];
  j["correctness_summary"] = corr.value("summary", nlohmann::json());

  std::ostringstream md;
  md << "# Keep the framework operator: " << r.spec.op << " on " << r.spec.device << "\n\n"
     << "The pilot of `" << r.spec.file << "` decided to keep the framework operator ("
     << default_fallback(r.spec.op) << "). What the measurements say:\n\n";
  for (const auto& reason : dec["reasons"])
    md << "- " << reason.get<std::string>() << "\n";
  if (!dec["supporting"].empty()) {
    md << "\nWhat did hold:\n\n";
    for (const auto& s : dec["supporting"])
      md << "- " << s.get<std::string>() << "\n";
  }
  if (corr.contains("repro"))
    md << "\nThe smallest failing case is kept in `" << corr["repro"]["dir"].get<std::string>()
       << "`; replay it with `" << corr["repro"]["command"].get<std::string>() << "`.\n";
  md << "\nAll numbers: `keep-framework.json` and `report.md` beside this file.\n";
  release::write_text(r.write_dir + "/keep-framework.json", j.dump(2) + "\n");
  release::write_text(r.write_dir + "/keep-framework.md", md.str());
  d["kind"] = "keep-framework";
  d["files"] = {"keep-framework.md", "keep-framework.json"};
}

} // namespace

void stage_release(PilotRun& r, const std::string& decision) {
  r.run_stage("release", [&](nlohmann::json& d) -> std::string {
    if (decision == kRelease) {
      write_release(r, d);
      return "passed";
    }
    if (decision == kKeepFramework) {
      write_keep_framework(r, d);
      return "passed";
    }
    return "not run: the decision is undecided (see its reasons); nothing to release or record";
  });
}

} // namespace tp::pilot
