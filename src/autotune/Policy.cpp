// Pinned and adaptive config choice, the pinned table's file format, and adaptive telemetry.
#include "autotune/Policy.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autotune/TuningDb.h"
#include "tilepilot/error.h"

namespace tp::autotune {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) user_error() << "pinned configs: cannot read " << path << ": " << std::strerror(errno);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded())
    user_error() << "pinned configs: " << path << " is not valid JSON; regenerate it from the "
                 << "release's tuning entries";
  return j;
}

/// Whether the file `fd` is empty or ends in a newline.
bool ends_whole(int fd) {
  struct stat st {};
  char last = '\n';
  return ::fstat(fd, &st) != 0 || st.st_size == 0 || ::pread(fd, &last, 1, st.st_size - 1) != 1 ||
         last == '\n';
}

// Appends one line under an flock, so concurrent processes never interleave partial lines.
// A writer killed inside its write() leaves a cut line (Linux stops a many-page write at a
// fatal signal), so a line is begun on a fresh line: the cut one stays alone, unparseable,
// and never swallows the next record. Telemetry is best effort: a failure is reported once
// and never changes the choice.
void append_telemetry(const std::string& path, const nlohmann::json& line) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::string text = line.dump() + "\n";
  int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && ::flock(fd, LOCK_EX) == 0;
  if (ok && !ends_whole(fd)) text.insert(0, "\n");
  ok = ok && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  if (fd >= 0) ::close(fd);
  static bool reported = false;
  if (!ok && !reported) {
    reported = true;
    std::cerr << "tilepilot: cannot append telemetry to " << path << ": " << std::strerror(err)
              << "; set the policy's telemetry path to a writable file\n";
  }
}

std::string ms_str(double ms) {
  std::ostringstream s;
  s.precision(4);
  s << ms << " ms";
  return s.str();
}

// The config after checking it against the operator; nullopt (with *why) when rejected.
std::optional<ops::Config> valid(const ops::Operator& op, const ops::Problem& p,
                                 const ops::Config& c, const std::string& arch, std::string* why) {
  try {
    ops::check_config(op, p, c, arch);
    return c;
  } catch (const UserError& e) {
    *why = reason_text(e);
    return std::nullopt;
  }
}

Choice choose_pinned(const Policy& policy, const ops::Operator& op, const ops::Problem& p,
                     const rt::DeviceInfo& d, const TuneKey& key) {
  Choice c{op.default_config(p, d.arch), "default", ""};
  const ops::Config* pinned = policy.pinned.find(key);
  if (!pinned) {
    c.reason = "no pinned config for " + key.canonical() + "; the operator's default for " + d.arch;
    return c;
  }
  std::string why;
  if (auto ok = valid(op, p, *pinned, d.arch, &why)) return {*ok, "pinned", "pinned for this key"};
  c.reason = "the pinned config " + ops::config_str(*pinned) + " is rejected: " + why;
  return c;
}

Choice choose_adaptive(const Policy& policy, const ops::Operator& op, const ops::Problem& p,
                       const rt::DeviceInfo& d, const TuneKey& key, nlohmann::json& telemetry) {
  const std::string dir = policy.db_dir.empty() ? TuningDb::default_dir() : policy.db_dir;
  TuningDb db(dir);
  const ops::Config dflt = op.default_config(p, d.arch);
  std::string why;
  if (std::optional<DbEntry> e = db.get(key)) {
    if (auto ok = valid(op, p, e->config, d.arch, &why))
      return {*ok, "db", "tuned earlier (" + e->written_at + ", " + ms_str(e->ms_median) + ")"};
    why = "the stored config " + ops::config_str(e->config) + " is rejected (" + why + "); ";
  }
  std::optional<TuneHooks> hooks = policy.hooks ? policy.hooks : default_hooks(op, p, d.arch);
  if (!hooks || !hooks->compile)
    return {dflt, "default",
            why + "not tuned: no tuning hooks registered (the CUDA backend registers them)"};
  if (!hooks->measure)
    return {dflt, "default",
            why + "not tuned: " +
                (hooks->why_no_measure.empty() ? "no measure hook" : hooks->why_no_measure)};
  ConfigSpace space = enumerate(op, p, TargetLimits::for_device(d), knob_space(op, d.arch));
  TuneOptions o = policy.tune;
  if (o.label.empty()) o.label = op.name() + " " + p.shape_str();
  TuneResult r = tune(space, *hooks, o);
  telemetry["tune"] = to_json(r);
  rethrow_device_fault(r); // the context is lost: no default to fall back to, nothing stored
  if (!r.found) {
    std::string counts;
    for (const auto& [s, n] : r.status_counts())
      counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + s;
    return {dflt, "default", why + "tuning found no correct candidate (" + counts + ")"};
  }
  const DbEntry e = winner_entry(key, r, dflt, "adaptive");
  db.put(e);
  std::ostringstream reason;
  reason << why << "tuned " << space.kept.size() << " candidates (" << space.pruned.size()
         << " pruned) in " << r.wall_s << " s: " << ms_str(e.ms_median);
  if (e.default_ms_median > 0) reason << " vs default " << ms_str(e.default_ms_median);
  return {r.best, "tuned", reason.str()};
}

} // namespace

DbEntry winner_entry(const TuneKey& key, const TuneResult& r, const ops::Config& dflt,
                     const std::string& source) {
  DbEntry e;
  e.key = key;
  e.config = r.best;
  e.ms_median = r.best_measurement.median_ms();
  e.default_ms_median = full_median_ms(r, dflt);
  e.source = source;
  e.extra = {{"wall_s", r.wall_s}, {"status_counts", r.status_counts()}};
  return e;
}

const char* policy_name(PolicyKind k) {
  return k == PolicyKind::pinned ? "pinned" : "adaptive";
}

PinnedTable PinnedTable::load(const std::string& path) {
  PinnedTable t;
  std::error_code ec;
  if (fs::is_directory(path, ec) && !fs::exists(path + "/pinned_configs.json", ec)) {
    // A directory of tuning-database entries (a release may ship its tuned entries as is).
    std::vector<std::string> files;
    for (const auto& f : fs::directory_iterator(path, ec))
      if (f.path().extension() == ".json" && f.path().filename().string()[0] != '.')
        files.push_back(f.path().string());
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      std::string why;
      std::optional<DbEntry> e = DbEntry::from_json(read_json_file(f), &why);
      if (!e) user_error() << "pinned configs: " << f << " is not a tuning entry: " << why;
      t.add(e->key, e->config);
    }
    return t;
  }
  std::string file = fs::is_directory(path, ec) ? path + "/pinned_configs.json" : path;
  nlohmann::json j = read_json_file(file);
  if (!j.is_object() || j.value("format", 0) != 1 || !j.contains("entries") ||
      !j["entries"].is_array())
    user_error() << "pinned configs: " << file << " must be {\"format\": 1, \"entries\": [...]}";
  for (size_t i = 0; i < j["entries"].size(); ++i) {
    const nlohmann::json& e = j["entries"][i];
    std::string why = "no \"key\"";
    std::optional<TuneKey> key =
        e.contains("key") ? TuneKey::from_json(e["key"], &why) : std::nullopt;
    if (!key) user_error() << "pinned configs: " << file << " entry " << i << ": " << why;
    ops::Config c;
    try {
      e.at("config").get_to(c);
    } catch (const nlohmann::json::exception& ex) {
      user_error() << "pinned configs: " << file << " entry " << i
                   << ": \"config\" must map knob names to integers (" << ex.what() << ")";
    }
    t.add(*key, c);
  }
  return t;
}

void PinnedTable::add(const TuneKey& key, ops::Config config) {
  entries_[key.canonical()] = {key, std::move(config)};
}

const ops::Config* PinnedTable::find(const TuneKey& key) const {
  auto it = entries_.find(key.canonical());
  return it == entries_.end() || !(it->second.first == key) ? nullptr : &it->second.second;
}

nlohmann::json PinnedTable::to_json() const {
  nlohmann::json j = {{"format", 1}, {"entries", nlohmann::json::array()}};
  for (const auto& [_, e] : entries_)
    j["entries"].push_back({{"key", e.first.to_json()}, {"config", e.second}});
  return j;
}

Choice choose_config(const Policy& policy, const ops::Operator& op, const ops::Problem& problem,
                     const rt::DeviceInfo& device) {
  const TuneKey key = make_key(problem, device);
  if (policy.kind == PolicyKind::pinned) return choose_pinned(policy, op, problem, device, key);
  auto t0 = std::chrono::steady_clock::now();
  nlohmann::json telemetry = {{"policy", "adaptive"}, {"key", key.to_json()}};
  Choice c = choose_adaptive(policy, op, problem, device, key, telemetry);
  telemetry["time"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  telemetry["choice_s"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  telemetry["source"] = c.source;
  telemetry["config"] = c.config;
  telemetry["reason"] = c.reason;
  std::string dir = policy.db_dir.empty() ? TuningDb::default_dir() : policy.db_dir;
  append_telemetry(policy.telemetry_path.empty() ? dir + "/telemetry.jsonl" : policy.telemetry_path,
                   telemetry);
  return c;
}

} // namespace tp::autotune
