// Reading release folders back, and the problem JSON shared by releases and reproducers.
#include "release/ReleaseManifest.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "release/Files.h"

namespace tp::release {

std::string file_list_hash(const nlohmann::json& files) {
  std::string list;
  for (const auto& [path, info] : files.items()) // nlohmann orders object keys
    list += path + "\n" + info.value("xxh64", "") + "\n";
  return xxh64_hex(list);
}

namespace {

nlohmann::json read_json(const std::string& path) {
  try {
    return nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) {
    user_error() << path << " is not valid JSON (" << plain_error_text(e)
                 << "); rerun the pilot to write the release again";
    throw;
  }
}

[[noreturn]] void invalid(const std::string& dir, const std::string& why) {
  user_error() << dir << ": invalid release: " << why
               << "; rerun the pilot instead of editing a release";
  std::abort();
}

/// Every regular file under `dir` but manifest.json, relative, sorted. Special files (FIFOs,
/// devices, sockets) and symbolic links are refused from their status, never opened.
std::vector<std::string> release_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec), end;
  if (ec) invalid(dir, "cannot list the folder (" + ec.message() + ")");
  for (; it != end; it.increment(ec)) {
    if (ec) invalid(dir, "cannot list the folder (" + ec.message() + ")");
    fs::file_status st = it->symlink_status(ec);
    std::string rel = fs::relative(it->path(), dir, ec).generic_string();
    if (fs::is_directory(st)) continue;
    if (fs::is_symlink(st)) invalid(dir, rel + " is a symbolic link; a release holds files only");
    if (!fs::is_regular_file(st))
      invalid(dir, rel + " is not a regular file (a FIFO, socket or device)");
    if (rel != "manifest.json") out.push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The manifest lists exactly the folder's files (an unlisted file, such as an edited copy of
/// the test matrix, invalidates the release as much as a changed one), the files a release
/// needs are among them, each hash matches, and so does the hash of the list itself.
void verify_files(const std::string& dir, const nlohmann::json& manifest) {
  if (!manifest.contains("files") || !manifest["files"].is_object())
    invalid(dir, "manifest.json has no \"files\" object");
  const nlohmann::json& listed = manifest["files"];
  std::vector<std::string> present = release_files(dir);
  for (const auto& f : present)
    if (!listed.contains(f)) invalid(dir, f + " is not listed in manifest.json");
  for (const char* need : {"pinned.json", "test_matrix.json", "fallback.json"})
    if (!listed.contains(need)) invalid(dir, std::string("manifest.json does not list ") + need);
  for (const auto& [path, info] : listed.items()) {
    if (path.empty() || path[0] == '/' || path.find("..") != std::string::npos)
      invalid(dir, "manifest.json lists '" + path + "', which is outside the release folder");
    if (!std::binary_search(present.begin(), present.end(), path))
      invalid(dir, path + " is listed in manifest.json but missing");
    if (!info.is_object() || !info.contains("xxh64") || !info["xxh64"].is_string())
      invalid(dir, "manifest.json has no xxh64 for " + path);
    std::string want = info["xxh64"].get<std::string>();
    std::string got = xxh64_hex(read_text(dir + "/" + path));
    if (got != want)
      user_error() << dir << "/" << path << ": content hash " << got << " does not match the "
                   << "manifest's " << want << "; the release was modified after the pilot "
                   << "wrote it - rerun the pilot instead of editing a release";
  }
  if (manifest.contains("files_xxh64") &&
      manifest["files_xxh64"] != file_list_hash(manifest["files"]))
    invalid(dir, "the hash of manifest.json's file list does not match its files_xxh64");
}

bool same_problem(const ops::Problem& a, const ops::Problem& b) {
  return a.op == b.op && a.dtype == b.dtype && a.shape == b.shape && a.options == b.options;
}

} // namespace

nlohmann::json problem_to_json(const ops::Problem& p) {
  return {{"op", p.op}, {"dtype", dtype_name(p.dtype)}, {"shape", p.shape}, {"options", p.options}};
}

ops::Problem problem_from_json(const nlohmann::json& j, const std::string& where) {
  try {
    const ops::Operator& op = ops::find_operator(j.at("op").get<std::string>());
    auto dt = parse_dtype(j.at("dtype").get<std::string>());
    if (!dt)
      user_error() << where << ": dtype " << j.at("dtype") << " is unknown; use bf16, f16 or f32";
    std::map<std::string, std::string> kv;
    for (const auto& [k, v] : j.at("shape").items())
      kv[k] = std::to_string(int_from_json(v, where, "shape." + k));
    const nlohmann::json options = j.value("options", nlohmann::json::object());
    for (const auto& [k, v] : options.items())
      kv[k] = v.get<std::string>();
    return op.parse(kv, *dt);
  } catch (const nlohmann::json::exception& e) {
    user_error() << where << ": malformed problem (" << plain_error_text(e)
                 << "); a problem is {op, dtype, shape: {key: int}, options: {key: str}}";
    throw;
  }
}

int64_t int_from_json(const nlohmann::json& v, const std::string& where, const std::string& what) {
  bool fits = v.is_number_integer() &&
              (!v.is_number_unsigned() ||
               v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  if (!fits)
    user_error() << where << ": " << what << " " << v.dump()
                 << " is not an integer (a whole number below 2^63)";
  return v.get<int64_t>();
}

ops::Config config_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object())
    user_error() << where << ": config " << j.dump() << " is not an object {knob: integer}";
  ops::Config c;
  for (const auto& [k, v] : j.items())
    c[k] = int_from_json(v, where, "config." + k);
  return c;
}

const PinnedEntry* Release::find(const std::string& arch, const ops::Problem& p,
                                 std::string* why_not) const {
  auto say = [&](const std::string& s) -> const PinnedEntry* {
    if (why_not) *why_not = s;
    return nullptr;
  };
  if (p.op != op) return say("operator " + p.op + " is not the released " + op);
  if (arch != device) return say("device " + arch + " is not the released " + device);
  const MatrixEntry* tested = nullptr;
  bool dtype_tested = false;
  for (const auto& m : matrix) {
    if (m.device != arch || m.problem.dtype != p.dtype) continue;
    dtype_tested = true;
    if (same_problem(m.problem, p)) tested = &m;
  }
  if (!dtype_tested)
    return say(std::string("dtype ") + dtype_name(p.dtype) + " is not in the tested matrix");
  if (!tested) return say("shape " + p.shape_str() + " is not in the tested matrix");
  if (!tested->passed) return say("shape " + p.shape_str() + " failed its test");
  if (const FrameworkRouted* f = routed_to_framework(p)) return say(framework_faster_text(*f));
  for (const auto& e : pinned)
    if (same_problem(e.problem, p)) return &e;
  return say("no pinned kernel for shape " + p.shape_str());
}

const FrameworkRouted* Release::routed_to_framework(const ops::Problem& p) const {
  for (const auto& f : framework_routed)
    if (same_problem(f.problem, p)) return &f;
  return nullptr;
}

std::string Release::framework_faster_text(const FrameworkRouted& f) const {
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.3f", f.kernel_speedup);
  return "the pilot measured " + fallback + " faster at shape " + f.problem.shape_str() +
         " (the kernel ran at " + ratio + "x)";
}

Release load_release(const std::string& dir) {
  Release r;
  r.dir = dir;
  r.manifest = read_json(dir + "/manifest.json");
  // Compared as JSON: value("format", "") throws on a manifest that is not an object or a
  // format that is not a string.
  if (!r.manifest.is_object() || !r.manifest.contains("format") ||
      r.manifest["format"] != kReleaseFormat)
    user_error() << dir << "/manifest.json: format is not " << kReleaseFormat
                 << "; pass a release/ folder written by `tilepilot pilot`";
  verify_files(dir, r.manifest);
  try {
    r.op = r.manifest.at("operator").get<std::string>();
    r.device = r.manifest.at("device").get<std::string>();
    nlohmann::json pinned = read_json(dir + "/pinned.json");
    for (const auto& e : pinned.at("entries")) {
      PinnedEntry p;
      p.problem = problem_from_json(e.at("problem"), dir + "/pinned.json");
      p.config = config_from_json(e.at("config"), dir + "/pinned.json");
      p.source_file = e.value("source", "");
      p.cubin_file = e.value("cubin", "");
      r.pinned.push_back(p);
    }
    for (const auto& e : pinned.value("framework_routed", nlohmann::json::array())) {
      FrameworkRouted f;
      f.problem = problem_from_json(e.at("problem"), dir + "/pinned.json");
      if (e.contains("warm")) f.kernel_speedup = e["warm"].value("speedup", 0.0);
      r.framework_routed.push_back(f);
    }
    nlohmann::json matrix = read_json(dir + "/test_matrix.json");
    for (const auto& [arch, dev] : matrix.at("devices").items())
      for (const auto& c : dev.at("cases")) {
        MatrixEntry m;
        m.device = arch;
        m.problem = problem_from_json(c.at("problem"), dir + "/test_matrix.json");
        m.passed = c.at("correctness").at("passed").get<bool>();
        m.max_abs_err = c.at("correctness").at("max_abs_err").get<double>();
        r.matrix.push_back(m);
      }
    nlohmann::json fb = read_json(dir + "/fallback.json");
    r.fallback = fb.at("operator").get<std::string>();
    r.fallback_reasons = fb.at("reasons").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    user_error() << dir << ": malformed release (" << plain_error_text(e)
                 << "); rerun the pilot to write it again";
  }
  return r;
}

} // namespace tp::release
