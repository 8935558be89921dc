// File helpers for pilot outputs.
#include "release/Files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <xxhash.h>

#include "tilepilot/error.h"

namespace tp::release {

namespace fs = std::filesystem;

void write_text(const std::string& path, const std::string& text) {
  fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    user_error() << "cannot write '" << tmp << "': " << std::strerror(errno)
                 << "; check that the output folder is writable and has free space (or pass "
                 << "another one with --out DIR)";
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) ok = false, err = errno;
  if (!ok) {
    fs::remove(tmp, ec); // never leave a truncated temporary behind
    user_error() << "cannot write '" << path << "': " << std::strerror(err)
                 << (err == ENOSPC ? " (the disk is full; free some space)" : "")
                 << "; check that the output folder is writable and has free space";
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignore;
    fs::remove(tmp, ignore);
    user_error() << "cannot rename '" << tmp << "' to '" << path << "': " << ec.message()
                 << "; check that the output folder is writable";
  }
}

std::string read_text(const std::string& path) {
  // stat, never open, first: opening a FIFO or a device would block or read forever.
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) user_error() << "cannot read '" << path << "': no such file";
  if (fs::is_directory(st))
    user_error() << "cannot read '" << path << "': it is a folder, not a file";
  if (!fs::is_regular_file(st))
    user_error() << "cannot read '" << path << "': not a regular file (a FIFO, socket or "
                 << "device); pass a regular file";
  std::ifstream in(path, std::ios::binary);
  if (!in)
    user_error() << "cannot read '" << path << "': " << std::strerror(errno)
                 << "; check its permissions";
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) user_error() << "cannot read '" << path << "': " << std::strerror(errno);
  return ss.str();
}

std::string plain_error_text(const std::exception& e) {
  std::string w = e.what();
  if (w.rfind("[json.exception.", 0) == 0)
    if (auto end = w.find("] "); end != std::string::npos) return w.substr(end + 2);
  return w;
}

std::string xxh64_hex(const std::string& bytes) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(XXH64(bytes.data(), bytes.size(), 0)));
  return buf;
}

} // namespace tp::release
