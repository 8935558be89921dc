// File helpers for pilot outputs.
#include "pilot/Files.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <xxhash.h>

#include "tilepilot/error.h"

namespace tp::pilot {

namespace fs = std::filesystem;

void write_text(const std::string& path, const std::string& text) {
  fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out)
      user_error() << "cannot write '" << tmp << "'; check that the output folder is writable "
                   << "(pass another one with --out DIR)";
  }
  fs::rename(tmp, path, ec);
  if (ec)
    user_error() << "cannot rename '" << tmp << "' to '" << path << "': " << ec.message()
                 << "; check that the output folder is writable";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) user_error() << "cannot read '" << path << "'; check that the file exists";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string xxh64_hex(const std::string& bytes) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(XXH64(bytes.data(), bytes.size(), 0)));
  return buf;
}

} // namespace tp::pilot
