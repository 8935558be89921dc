// The pilot's output folder: staging sibling, sweep of dead runs' leftovers, atomic swap.
#include "pilot/OutputDir.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

#include "tilepilot/error.h"

namespace tp::pilot {

namespace fs = std::filesystem;

namespace {

const char* kTag = ".tilepilot-"; // ".<name>.tilepilot-staging-<pid>" / "...-old-<pid>"

std::string sibling(const fs::path& dir, const std::string& kind, long pid) {
  return (dir.parent_path() /
          ("." + dir.filename().string() + kTag + kind + "-" + std::to_string(pid)))
      .string();
}

bool pid_alive(long pid) {
  if (pid <= 0) return false;
  if (pid == static_cast<long>(::getpid())) return true;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

/// Removes the staging and old siblings of runs that are no longer alive. An "old" sibling is
/// the previous output of a run killed between the two renames of the non-atomic fallback: when
/// the folder itself is missing, it is put back instead.
void sweep(const fs::path& dir) {
  std::error_code ec;
  const std::string prefix = "." + dir.filename().string() + kTag;
  std::vector<std::pair<fs::path, std::string>> found; // path, kind
  for (fs::directory_iterator it(dir.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (n.rfind(prefix, 0) != 0) continue;
    std::string rest = n.substr(prefix.size()); // "staging-123"
    auto dash = rest.rfind('-');
    if (dash == std::string::npos) continue;
    long pid = std::strtol(rest.c_str() + dash + 1, nullptr, 10);
    if (pid_alive(pid)) continue;
    found.emplace_back(it->path(), rest.substr(0, dash));
  }
  for (const auto& [p, kind] : found) {
    if (kind == "old" && !fs::exists(dir, ec)) {
      fs::rename(p, dir, ec);
      if (!ec) continue;
    }
    fs::remove_all(p, ec);
  }
}

bool is_pilot_output(const std::string& name) {
  const auto& names = pilot_output_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) return true;
  // write_text's temporaries, left by a killed run of a version that wrote in place.
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
}

bool contains(const fs::path& outer, const fs::path& inner) {
  auto o = outer.begin(), i = inner.begin();
  for (; o != outer.end(); ++o, ++i)
    if (i == inner.end() || *o != *i) return false;
  return true;
}

} // namespace

const std::vector<std::string>& pilot_output_names() {
  static const std::vector<std::string> names = {
      "report.json", "report.md",         "report.html",        "repro",
      "release",     "keep-framework.md", "keep-framework.json"};
  return names;
}

OutputDir prepare_output_dir(const std::string& out, bool force) {
  if (out.empty()) user_error() << "--out is empty; pass a folder for the pilot's output";
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(out), ec);
  if (ec) p = fs::absolute(out);
  p = p.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  if (!p.has_parent_path() || p == p.root_path() || p.filename() == "..")
    user_error() << "--out '" << out << "' is not a folder the pilot can replace; pass a new "
                 << "folder such as pilot-out/NAME";
  fs::path cwd = fs::weakly_canonical(fs::current_path(ec), ec);
  if (!ec && contains(p, cwd))
    user_error() << "--out '" << out << "' is the current folder or one above it, which the "
                 << "pilot would replace; pass a new folder such as pilot-out/NAME";
  fs::file_status st = fs::status(p, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    user_error() << "--out '" << out << "' exists and is not a folder; pass a folder (it is "
                 << "created when missing), e.g. --out " << out << "-pilot";
  fs::create_directories(p.parent_path(), ec);
  if (ec)
    user_error() << "cannot create '" << p.parent_path().string()
                 << "' for the pilot's output: " << ec.message()
                 << "; pass --out in a writable place";
  sweep(p);
  if (fs::is_directory(st)) {
    // A user's regular files beside the outputs (a log the run is tee'd into, notes) are kept;
    // a folder or special file there means the path is not a pilot's folder.
    std::vector<std::string> foreign;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      std::string n = it->path().filename().string();
      std::error_code e2;
      if (!is_pilot_output(n) && !fs::is_regular_file(it->symlink_status(e2))) foreign.push_back(n);
    }
    if (ec)
      user_error() << "cannot list the output folder '" << p.string() << "': " << ec.message()
                   << "; pass another folder with --out";
    if (!foreign.empty() && !force) {
      std::sort(foreign.begin(), foreign.end());
      std::string list;
      for (size_t i = 0; i < foreign.size() && i < 5; ++i)
        list += (i ? ", '" : "'") + foreign[i] + "'";
      if (foreign.size() > 5) list += ", ...";
      user_error() << "--out '" << out << "' holds folders or special files that are not a "
                   << "pilot's output (" << list << "); the pilot replaces the folder when it "
                   << "finishes (keeping only its regular files), so pass --force to replace "
                   << "it anyway, or a new folder";
    }
  }
  OutputDir d;
  d.final_dir = p.string();
  d.staging_dir = sibling(p, "staging", ::getpid());
  fs::remove_all(d.staging_dir, ec);
  if (!fs::create_directory(d.staging_dir, ec) || ec)
    user_error() << "cannot create '" << d.staging_dir << "' beside the output folder: "
                 << (ec ? ec.message() : std::string("it already exists"))
                 << "; pass --out in a writable place with free space";
  return d;
}

void commit_output_dir(const OutputDir& d) {
  std::error_code ec;
  // The user's regular files in the folder move with it: hard links (the same file, so a log
  // still being written keeps going to it), a copy where links are not possible. The new
  // outputs win a name clash.
  for (fs::directory_iterator it(d.final_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    std::error_code e2;
    if (is_pilot_output(n) || !fs::is_regular_file(it->symlink_status(e2))) continue;
    fs::path to = fs::path(d.staging_dir) / n;
    if (fs::exists(to, e2)) continue;
    fs::create_hard_link(it->path(), to, e2);
    if (e2) fs::copy_file(it->path(), to, e2);
  }
  ec.clear();
  const char* from = d.staging_dir.c_str();
  const char* to = d.final_dir.c_str();
  if (::rename(from, to) == 0) return; // `to` was missing or an empty folder
  if (errno != EEXIST && errno != ENOTEMPTY)
    user_error() << "cannot move the pilot's output from '" << d.staging_dir << "' to '"
                 << d.final_dir << "': " << std::strerror(errno)
                 << "; the new output is left in the former, the earlier one untouched";
  if (::renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE) == 0) {
    fs::remove_all(d.staging_dir, ec); // now the earlier output
    return;
  }
  // A file system without RENAME_EXCHANGE: two renames. A kill between them leaves the earlier
  // output as the "old" sibling, which the next run's sweep puts back.
  std::string old = sibling(fs::path(d.final_dir), "old", ::getpid());
  fs::rename(d.final_dir, old, ec);
  if (!ec) fs::rename(d.staging_dir, d.final_dir, ec);
  if (ec)
    user_error() << "cannot replace '" << d.final_dir << "' with the pilot's output in '"
                 << d.staging_dir << "': " << ec.message();
  fs::remove_all(old, ec);
}

void abandon_output_dir(const OutputDir& d) noexcept {
  std::error_code ec;
  if (!d.staging_dir.empty()) fs::remove_all(d.staging_dir, ec);
}

} // namespace tp::pilot
