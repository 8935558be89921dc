// capture_environment() and its JSON/text forms. Every probe is guarded: a missing library or
// device turns into a "not found: <reason>" string, never an exception.
#include "runtime/Environment.h"

#include <cstdlib>
#include <cuda.h>
#include <fmt/format.h>
#include <sys/utsname.h>

#include "runtime/BuildInfo.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/Driver.h"
#include "runtime/DynamicLibrary.h"
#include "runtime/Nvrtc.h"

namespace tp::rt {

namespace {

/// cuBLAS and cuDNN 9 encode major*10000 + minor*100 + patch; cuDNN 8 used major*1000.
std::string decode_version(size_t v) {
  if (v < 90000) return fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

std::string library_version(const std::vector<std::string>& candidates, const char* fn_name) {
  std::string why;
  auto lib = open_library(candidates, &why);
  if (!lib) return "not found: " + why;
  using GetVersion = size_t (*)();
  auto fn = reinterpret_cast<GetVersion>(lib->symbol(fn_name));
  if (!fn) return "not found: " + lib->path + " has no " + fn_name;
  return decode_version(fn()) + " (" + lib->path + ")";
}

std::string os_text() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return std::string(u.sysname) + " " + u.release + " " + u.machine;
}

} // namespace

std::string cublaslt_version() {
  return library_version(cuda_library_candidates({"libcublasLt.so.13", "libcublasLt.so.12"}),
                         "cublasLtGetVersion");
}

std::string cudnn_version() {
  if (const char* p = std::getenv("TILEPILOT_CUDNN_PATH"); p && *p)
    return library_version({p}, "cudnnGetVersion");
  return library_version(cuda_library_candidates({"libcudnn.so.9"}), "cudnnGetVersion");
}

EnvironmentInfo capture_environment() {
  EnvironmentInfo e;
  e.tilepilot_version = TILEPILOT_VERSION;
  e.git_commit = build_git_commit();
  e.host_compiler = TILEPILOT_CXX_COMPILER;
  e.os = os_text();
  e.cuda_toolkit = fmt::format("{}.{}", CUDA_VERSION / 1000, (CUDA_VERSION % 1000) / 10);
  std::string why;
  e.nvrtc = nvrtc_available(&why) ? nvrtc_version() + " (" + nvrtc_library_path() + ")"
                                  : "not found: " + why;
  if (driver_available(&why)) {
    int v = driver().version;
    e.driver = fmt::format("{}.{} ({})", v / 1000, (v % 1000) / 10, driver().lib.path);
    int n = device_count(&why);
    for (int i = 0; i < n; ++i) {
      std::string why_dev;
      if (auto info = device_info(i, &why_dev))
        e.gpus.push_back(*info);
      else
        e.gpu_note += (e.gpu_note.empty() ? "" : "; ") + why_dev;
    }
    if (n == 0) e.gpu_note = "no GPU: " + why;
  } else {
    e.driver = "not found: " + why;
    e.gpu_note = "no GPU: " + why;
  }
  e.cublaslt = cublaslt_version();
  e.cudnn = cudnn_version();
  return e;
}

nlohmann::json to_json(const DeviceInfo& d) {
  return {{"ordinal", d.ordinal},
          {"name", d.name},
          {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
          {"arch", d.arch},
          {"sm_count", d.sm_count},
          {"total_memory_bytes", d.total_memory_bytes},
          {"l2_bytes", d.l2_bytes},
          {"max_shared_per_block_optin", d.max_shared_per_block_optin},
          {"max_shared_per_sm", d.max_shared_per_sm},
          {"clock_khz", d.clock_khz},
          {"memory_clock_khz", d.memory_clock_khz},
          {"memory_bus_bits", d.memory_bus_bits},
          {"driver_version", d.driver_version}};
}

nlohmann::json to_json(const EnvironmentInfo& e) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const DeviceInfo& d : e.gpus)
    gpus.push_back(to_json(d));
  nlohmann::json j = {{"tilepilot_version", e.tilepilot_version},
                      {"git_commit", e.git_commit},
                      {"host_compiler", e.host_compiler},
                      {"os", e.os},
                      {"cuda_toolkit", e.cuda_toolkit},
                      {"nvrtc", e.nvrtc},
                      {"driver", e.driver},
                      {"gpus", gpus},
                      {"cublaslt", e.cublaslt},
                      {"cudnn", e.cudnn}};
  if (!e.gpu_note.empty()) j["gpu_note"] = e.gpu_note;
  return j;
}

nlohmann::json to_env_json(const EnvironmentInfo& e) {
  nlohmann::json j;
  j["tilepilot"] = e.tilepilot_version;
  j["git_commit"] = e.git_commit;
  j["compiler"] = e.host_compiler;
  j["os"] = e.os;
  j["cuda_toolkit"] = e.cuda_toolkit;
  j["nvrtc"] = e.nvrtc;
  j["driver"] = e.driver;
  j["gpus"] = nlohmann::json::array();
  for (const auto& g : e.gpus)
    j["gpus"].push_back({{"ordinal", g.ordinal},
                         {"name", g.name},
                         {"arch", g.arch},
                         {"sm_count", g.sm_count},
                         {"memory_bytes", g.total_memory_bytes},
                         {"l2_bytes", g.l2_bytes}});
  if (!e.gpu_note.empty()) j["gpu_note"] = e.gpu_note;
  j["cublaslt"] = e.cublaslt;
  j["cudnn"] = e.cudnn;
  return j;
}

std::string to_text(const EnvironmentInfo& e) {
  std::string s;
  auto line = [&](const char* k, const std::string& v) { s += fmt::format("{:<14}{}\n", k, v); };
  line("tilepilot", e.tilepilot_version + " (" + e.git_commit + ")");
  line("compiler", e.host_compiler);
  line("os", e.os);
  line("cuda toolkit", e.cuda_toolkit + " (headers at build time)");
  line("nvrtc", e.nvrtc);
  line("driver", e.driver);
  if (e.gpus.empty()) line("gpu", e.gpu_note);
  for (const DeviceInfo& d : e.gpus)
    line(fmt::format("gpu {}", d.ordinal).c_str(),
         fmt::format("{} ({}, {} SMs, {}, L2 {})", d.name, d.arch, d.sm_count,
                     format_bytes(d.total_memory_bytes), format_bytes(uint64_t(d.l2_bytes))));
  if (!e.gpus.empty() && !e.gpu_note.empty()) line("gpu note", e.gpu_note);
  line("cublaslt", e.cublaslt);
  line("cudnn", e.cudnn);
  return s;
}

} // namespace tp::rt
