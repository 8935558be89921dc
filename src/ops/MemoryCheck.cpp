// Memory estimates checked before allocation.
#include "ops/MemoryCheck.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tilepilot/error.h"

namespace tp::ops {

namespace {

std::string gib(double bytes) {
  char b[64];
  std::snprintf(b, sizeof b, "%.3g GiB (%.0f bytes)", bytes / (1024.0 * 1024 * 1024), bytes);
  return b;
}

double read_number(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return 0;
  try {
    return std::stod(s);
  } catch (const std::exception&) {
    return 0;
  }
}

} // namespace

double problem_bytes(const Operator& op, const Problem& p) {
  // Inputs and outputs at their dtype, the poisoned outputs' copy and the fp64 reference of
  // the checked boxes: 1.5x covers them.
  return 1.5 * op.min_bytes(p);
}

double host_available_bytes() {
  if (const char* env = std::getenv("TILEPILOT_HOST_MEMORY_BYTES")) {
    try {
      return std::stod(env);
    } catch (const std::exception&) {}
  }
  double avail = 0;
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream ss(line.substr(13));
      double kb = 0;
      ss >> kb;
      avail = kb * 1024;
    }
  // A container's limit is often lower than the machine's memory.
  double limit = read_number("/sys/fs/cgroup/memory.max");
  double used = read_number("/sys/fs/cgroup/memory.current");
  if (limit > 0 && limit > used) avail = avail > 0 ? std::min(avail, limit - used) : limit - used;
  return avail;
}

double intermediate_bytes(const KernelProgram& prog) {
  double bytes = 0;
  for (const ArgSpec& a : prog.intermediates) {
    double n = dtype_bytes(a.dtype);
    for (int64_t e : a.shape)
      n *= static_cast<double>(e);
    bytes += n;
  }
  return bytes;
}

void require_memory(const Operator& op, const Problem& p, const std::string& where,
                    double device_bytes, double extra_bytes) {
  const double need = problem_bytes(op, p) + extra_bytes;
  const double host = host_available_bytes();
  const std::string what = where + ": " + op.name() + " " + p.shape_str() + " " +
                           dtype_name(p.dtype) + " needs about " + gib(need);
  if (host > 0 && need > host)
    user_error() << what << " of host memory, but this machine has " << gib(host)
                 << " available; use a smaller shape";
  if (device_bytes > 0 && need > device_bytes)
    user_error() << what << " of device memory, but the GPU has " << gib(device_bytes)
                 << "; use a smaller shape";
}

} // namespace tp::ops
