// The kernel cache's entry format and file handling. An entry file is
//   EntryHeader | cubin | ptx | log
// with the header's checksum (XXH64) covering the header itself (checksum field zeroed) and the
// whole payload, so any flipped byte or truncation is caught before the cubin is used.
#include "runtime/KernelCache.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <unistd.h>

#include "runtime/DeviceHeaders.h"
#include "runtime/Hash.h"
#include "runtime/TempFiles.h"
#include "tilepilot/error.h"

namespace fs = std::filesystem;

namespace tp::rt {

namespace {

constexpr char kMagic[8] = {'T', 'P', 'K', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kFormatVersion = 1;

struct EntryHeader { // native byte order: entries are per machine, never shipped
  char magic[8];
  uint32_t format_version;
  uint32_t header_bytes;
  char key[32];
  uint64_t cubin_bytes, ptx_bytes, log_bytes;
  double seconds;    // the original NVRTC compile time
  uint64_t checksum; // see the file comment
};
static_assert(sizeof(EntryHeader) == 88, "EntryHeader must have no padding");

uint64_t checksum_of(const std::string& entry) {
  EntryHeader h;
  std::memcpy(&h, entry.data(), sizeof h);
  h.checksum = 0;
  return xxh64(entry.data() + sizeof h, entry.size() - sizeof h, xxh64(&h, sizeof h));
}

bool valid_key(const std::string& key) {
  if (key.size() != 32) return false;
  for (char c : key)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

/// Why `entry` is not a valid entry for `key`, or "" when it is.
std::string validate(const std::string& entry, const std::string& key, EntryHeader* h) {
  if (entry.size() < sizeof(EntryHeader)) return "truncated header";
  std::memcpy(h, entry.data(), sizeof *h);
  if (std::memcmp(h->magic, kMagic, sizeof kMagic) != 0) return "bad magic";
  if (h->format_version != kFormatVersion || h->header_bytes != sizeof(EntryHeader))
    return "unknown format version " + std::to_string(h->format_version);
  if (std::string(h->key, 32) != key) return "key mismatch";
  uint64_t payload = entry.size() - sizeof(EntryHeader);
  if (h->cubin_bytes > payload || h->ptx_bytes > payload || h->log_bytes > payload ||
      h->cubin_bytes + h->ptx_bytes + h->log_bytes != payload)
    return "size mismatch (truncated or extended)";
  if (checksum_of(entry) != h->checksum) return "checksum mismatch";
  return "";
}

} // namespace

std::string default_cache_dir() {
  if (const char* d = std::getenv("TILEPILOT_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/tilepilot";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/tilepilot";
  return "/tmp/tilepilot-cache-" + std::to_string(getuid());
}

namespace {

bool cache_disabled_by_env() {
  const char* v = std::getenv("TILEPILOT_CACHE");
  if (!v) return false;
  std::string s = v;
  return s == "off" || s == "0" || s == "false" || s == "no";
}

/// Writes all of `data` to `fd`; false with errno set on failure.
bool write_all(int fd, const char* data, size_t n) {
  while (n) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= size_t(w);
  }
  return true;
}

} // namespace

std::string cache_key(const std::string& canonical_ir, const std::string& arch,
                      const std::vector<std::string>& options) {
  return cache_key_for_versions(canonical_ir, arch, options, device_library_version(),
                                nvrtc_available() ? nvrtc_version() : "nvrtc-missing");
}

std::string cache_key_for_versions(const std::string& canonical_ir, const std::string& arch,
                                   const std::vector<std::string>& options,
                                   const std::string& device_library, const std::string& nvrtc) {
  FieldHasher h;
  h.add("tilepilot-kernel-cache").add(std::to_string(kFormatVersion));
  h.add(canonical_ir).add(arch);
  std::vector<std::string> opts = nvrtc_effective_options(arch, options);
  h.add(std::to_string(opts.size()));
  for (const std::string& o : opts)
    h.add(o);
  h.add(device_library).add(nvrtc);
  return h.hex();
}

KernelCache::KernelCache(std::string dir, bool enabled) : dir_(std::move(dir)), enabled_(enabled) {}

KernelCache& KernelCache::global() {
  static KernelCache cache(default_cache_dir(), !cache_disabled_by_env());
  return cache;
}

std::string KernelCache::entry_path(const std::string& key) const {
  internal_assert(valid_key(key)) << "kernel cache key '" << key << "' is not 32 hex digits";
  return dir_ + "/" + key + ".tpk";
}

void KernelCache::warn_once(std::atomic<bool>& flag, const std::string& message) {
  if (!flag.exchange(true)) std::cerr << "tilepilot: warning: " << message << "\n";
}

std::optional<CompileOutput> KernelCache::lookup(const std::string& key) {
  if (!enabled_) return std::nullopt;
  std::string path = entry_path(key);
  // stat, never open, first: opening a FIFO would block the process, and a folder in an
  // entry's place would make every store of that key fail. Either is removed and rebuilt.
  std::error_code sec;
  fs::file_status st = fs::symlink_status(path, sec);
  if (!fs::exists(st)) return std::nullopt;
  if (!fs::is_regular_file(st)) {
    std::error_code ec;
    fs::remove_all(path, ec);
    ++corrupt_;
    warn_once(warned_corrupt_,
              "kernel cache entry " + path + " is not a regular file (" +
                  (fs::is_directory(st) ? "a folder" : "a FIFO, socket, device or link") + "); " +
                  (ec ? "could not remove it (" + ec.message() + ")" : "removed it") +
                  " and recompiling. Further invalid entries are handled the same "
                  "way without a warning.");
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string entry((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  EntryHeader h;
  if (std::string why = validate(entry, key, &h); !why.empty()) {
    std::error_code ec;
    fs::remove(path, ec);
    ++corrupt_;
    warn_once(warned_corrupt_, "kernel cache entry " + path + " is invalid (" + why +
                                   "); removed it and recompiling. Further invalid entries are "
                                   "handled the same way without a warning.");
    return std::nullopt;
  }
  CompileOutput out;
  const char* p = entry.data() + sizeof(EntryHeader);
  out.cubin.assign(p, p + h.cubin_bytes);
  p += h.cubin_bytes;
  out.ptx.assign(p, h.ptx_bytes);
  p += h.ptx_bytes;
  out.log.assign(p, h.log_bytes);
  out.seconds = h.seconds;
  return out;
}

void KernelCache::store(const std::string& key, const CompileOutput& out) {
  if (!enabled_) return;
  std::string path = entry_path(key);
  EntryHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.format_version = kFormatVersion;
  h.header_bytes = sizeof h;
  std::memcpy(h.key, key.data(), 32);
  h.cubin_bytes = out.cubin.size();
  h.ptx_bytes = out.ptx.size();
  h.log_bytes = out.log.size();
  h.seconds = out.seconds;
  std::string entry(reinterpret_cast<const char*>(&h), sizeof h);
  entry.append(out.cubin.begin(), out.cubin.end());
  entry += out.ptx;
  entry += out.log;
  h.checksum = checksum_of(entry);
  std::memcpy(entry.data(), &h, sizeof h);

  // Same directory as the entry, so rename() is atomic; the name is unique per process and
  // call, so concurrent writers of one key never share a temporary file.
  std::string tmp = temp_path(dir_, key);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  // Once per cache object: the temporary files of writers killed before their rename.
  if (!swept_.exchange(true)) sweep_orphan_temps(dir_);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write_all(fd, entry.data(), entry.size()) && ::fsync(fd) == 0;
  int err = errno;
  if (fd >= 0) ok = (::close(fd) == 0) && ok;
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    warn_once(warned_write_, "cannot write the kernel cache in " + dir_ + " (" +
                                 std::strerror(err) +
                                 "); continuing without it. Set TILEPILOT_CACHE_DIR to a "
                                 "writable directory or TILEPILOT_CACHE=off.");
  }
}

} // namespace tp::rt
