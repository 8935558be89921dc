// Temporary-file names and the sweep of orphans (see TempFiles.h).
#include "runtime/TempFiles.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <unistd.h>

namespace tp::rt {

namespace fs = std::filesystem;

std::string temp_path(const std::string& dir, const std::string& tag) {
  static std::atomic<uint64_t> counter{0};
  return dir + "/.tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." + tag;
}

namespace {

/// The writer's pid in a temporary file's name, or -1 when the name is not one of ours.
long writer_pid(const std::string& name) {
  std::string digits;
  if (name.rfind(".tmp.", 0) == 0) {
    // .tmp.<pid>.<n>.<tag>
    size_t end = name.find('.', 5);
    if (end == std::string::npos) return -1;
    digits = name.substr(5, end - 5);
  } else if (name.rfind(".tmp-", 0) == 0) {
    // .tmp-<key>-<pid>-<n> (the kernel cache before temp_path)
    size_t last = name.rfind('-'),
           prev = last == std::string::npos ? last : name.rfind('-', last - 1);
    if (prev == std::string::npos || prev < 5) return -1;
    digits = name.substr(prev + 1, last - prev - 1);
  } else {
    return -1;
  }
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != digits.npos)
    return -1;
  return std::stol(digits);
}

bool process_gone(long pid) {
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

} // namespace

int sweep_orphan_temps(const std::string& dir, double min_age_s) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return 0;
  const auto now = fs::file_time_type::clock::now();
  int removed = 0;
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    const long pid = writer_pid(name);
    if (pid <= 0 || pid == ::getpid()) continue;
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    const auto mtime = it->last_write_time(e2);
    if (e2) continue;
    const double age = std::chrono::duration<double>(now - mtime).count();
    if ((process_gone(pid) && age >= min_age_s) || age > 24 * 3600.0)
      removed += fs::remove(it->path(), e2) ? 1 : 0;
  }
  return removed;
}

} // namespace tp::rt
