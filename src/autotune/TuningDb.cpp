// The on-disk tuning database: atomic replace, per-key flock, tolerant reads.
#include "autotune/TuningDb.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "release/Files.h"
#include "release/ReleaseManifest.h"
#include "runtime/TempFiles.h"
#include "tilepilot/error.h"

namespace tp::autotune {

namespace fs = std::filesystem;

namespace {

constexpr int kFormat = 1;

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Holds an exclusive flock on a lock file for its lifetime.
class FileLock {
public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      user_error() << "tuning database: cannot open lock file " << path << ": "
                   << std::strerror(errno)
                   << "; set TILEPILOT_TUNE_DB to a directory you can write";
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd_);
      user_error() << "tuning database: cannot lock " << path << ": " << std::strerror(err);
    }
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

private:
  int fd_ = -1;
};

// Files already reported as unreadable in this process: report once, not on every lookup. A
// file is identified by path and (inode, mtime, size), so a later, different bad file at the
// same path is reported again.
bool first_report(const std::string& path) {
  static std::mutex mu;
  static std::set<std::string> seen;
  struct stat st {};
  std::string id = path;
  if (::stat(path.c_str(), &st) == 0)
    id += "|" + std::to_string(st.st_ino) + "|" + std::to_string(st.st_mtim.tv_sec) + "." +
          std::to_string(st.st_mtim.tv_nsec) + "|" + std::to_string(st.st_size);
  std::lock_guard<std::mutex> lock(mu);
  return seen.insert(id).second;
}

} // namespace

nlohmann::json DbEntry::to_json() const {
  return {{"format", kFormat},
          {"key", key.to_json()},
          {"config", config},
          {"ms_median", ms_median},
          {"default_ms_median", default_ms_median},
          {"source", source},
          {"written_at", written_at},
          {"extra", extra}};
}

std::optional<DbEntry> DbEntry::from_json(const nlohmann::json& j, std::string* why) {
  try {
    if (!j.is_object()) throw std::runtime_error("the entry is not a JSON object");
    if (j.at("format") != kFormat) // compared as JSON: get<int>() of 1e30 is undefined
      throw std::runtime_error("format " + j.at("format").dump() + " is not " +
                               std::to_string(kFormat));
    DbEntry e;
    std::optional<TuneKey> k = TuneKey::from_json(j.at("key"), why);
    if (!k) return std::nullopt;
    e.key = *k;
    e.config = release::config_from_json(j.at("config"), "tuning entry");
    if (e.config.empty()) throw std::runtime_error("the config is empty");
    e.ms_median = j.value("ms_median", -1.0);
    e.default_ms_median = j.value("default_ms_median", -1.0);
    e.source = j.value("source", "");
    e.written_at = j.value("written_at", "");
    if (j.contains("extra")) e.extra = j.at("extra");
    return e;
  } catch (const std::exception& e) {
    // The reason is printed as "ignoring tuning entry F: <why>": the message alone, without a
    // JSON library's exception tag or a user error's "error: ".
    std::string w = release::plain_error_text(e);
    if (w.rfind("error: ", 0) == 0) w = w.substr(7);
    if (why) *why = w;
    return std::nullopt;
  }
}

std::string TuningDb::default_dir() {
  if (const char* d = std::getenv("TILEPILOT_TUNE_DB"); d && *d) return d;
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/tilepilot/tune";
  user_error() << "tuning database: neither TILEPILOT_TUNE_DB nor HOME is set; set "
                  "TILEPILOT_TUNE_DB to a writable directory";
  return "";
}

TuningDb::TuningDb(std::string dir, Reporter report)
    : dir_(std::move(dir)), report_(std::move(report)) {
  if (!report_) report_ = [](const std::string& m) { std::cerr << "tilepilot: " << m << "\n"; };
}

std::string TuningDb::path_for(const TuneKey& key) const {
  return dir_ + "/" + key.file_stem() + ".json";
}

std::optional<DbEntry> TuningDb::read_file(const std::string& path, const TuneKey* expect) const {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt; // absent: not an error
  std::stringstream text;
  text << in.rdbuf();
  std::string why;
  std::optional<DbEntry> e;
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    why = text.str().empty() ? "the file is empty" : "the file is not valid JSON (truncated?)";
  else
    e = DbEntry::from_json(j, &why);
  if (e && expect && !(e->key == *expect)) {
    why = "its stored key differs from the key its name was derived from (" + e->key.canonical() +
          ")";
    e.reset();
  }
  if (!e && first_report(path))
    report_("ignoring tuning entry " + path + ": " + why +
            "; the next tune of this key replaces it (or delete the file)");
  return e;
}

void TuningDb::write_file(const std::string& path, const DbEntry& e) const {
  // Once per process and directory: the temporary files of writers killed before their rename.
  {
    static std::mutex m;
    static std::set<std::string> swept;
    std::lock_guard<std::mutex> l(m);
    if (swept.insert(dir_).second) rt::sweep_orphan_temps(dir_);
  }
  const std::string text = e.to_json().dump(2) + "\n";
  const std::string tmp_path = rt::temp_path(dir_, "json");
  int err = 0;
  auto fail = [&](bool failed) {
    if (failed && !err) err = errno ? errno : EIO;
    return !failed;
  };
  int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool ok = fail(fd < 0);
  for (size_t off = 0; ok && off < text.size();) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    ok = fail(n <= 0);
    off += ok ? static_cast<size_t>(n) : 0;
  }
  // fsync before rename: after a crash the name points at complete contents or the old file.
  ok = ok && fail(::fsync(fd) != 0);
  if (fd >= 0) ok = fail(::close(fd) != 0) && ok;
  ok = ok && fail(::rename(tmp_path.c_str(), path.c_str()) != 0);
  if (!ok) {
    ::unlink(tmp_path.c_str());
    user_error() << "tuning database: cannot write " << path << ": " << std::strerror(err)
                 << "; set TILEPILOT_TUNE_DB to a directory you can write";
  }
}

bool TuningDb::update(
    const TuneKey& key,
    const std::function<std::optional<DbEntry>(const std::optional<DbEntry>&)>& f) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    user_error() << "tuning database: cannot create " << dir_ << ": " << ec.message()
                 << "; set TILEPILOT_TUNE_DB to a directory you can write";
  FileLock lock(dir_ + "/" + key.file_stem() + ".lock");
  const std::string path = path_for(key);
  std::optional<DbEntry> next = f(read_file(path, &key));
  if (!next) return false;
  internal_assert(next->key == key) << "TuningDb::update: the entry's key changed";
  if (next->written_at.empty()) next->written_at = utc_now();
  write_file(path, *next);
  return true;
}

void TuningDb::put(DbEntry e) const {
  TuneKey key = e.key;
  update(key, [&](const std::optional<DbEntry>&) { return std::optional<DbEntry>(std::move(e)); });
}

std::optional<DbEntry> TuningDb::get(const TuneKey& key) const {
  return read_file(path_for(key), &key);
}

std::vector<DbEntry> TuningDb::list() const {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir_, ec)) {
    std::string name = f.path().filename().string();
    if (name.size() > 5 && name[0] != '.' && name.ends_with(".json"))
      paths.push_back(f.path().string());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<DbEntry> out;
  for (const std::string& p : paths) {
    std::optional<DbEntry> e = read_file(p, nullptr);
    // A file whose name is not its key's stem was copied or renamed by hand: not trusted.
    if (e && fs::path(p).filename().string() != e->key.file_stem() + ".json") {
      if (first_report(p))
        report_("ignoring tuning entry " + p + ": its name does not match its key");
      continue;
    }
    if (e) out.push_back(std::move(*e));
  }
  return out;
}

} // namespace tp::autotune
