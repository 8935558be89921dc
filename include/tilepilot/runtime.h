// The runtime as seen from outside: what the machine offers (driver, GPUs, NVRTC, vendor
// libraries). Everything is loaded at run time, so these calls work, and say what is missing,
// on a machine with no GPU and no driver. Internals (JIT, cache, launch) live in src/runtime/.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tp::rt {

struct DeviceInfo {
  int ordinal = 0;
  std::string name; // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  std::string arch; // NVRTC target: "sm_90a" on 9.0 (arch-specific features), "sm_80"
  int sm_count = 0;
  uint64_t total_memory_bytes = 0;
  int l2_bytes = 0;
  int max_shared_per_block_optin = 0; // bytes, after cuFuncSetAttribute opt-in
  int max_shared_per_sm = 0;
  int clock_khz = -1, memory_clock_khz = -1, memory_bus_bits = -1; // -1: driver did not say
  std::string driver_version;                                      // "13.0"
};

/// Whether libcuda.so.1 loads and cuInit succeeds; if not, `why_not` says which step failed.
bool driver_available(std::string* why_not = nullptr);

/// Number of CUDA devices; 0 (with the reason) when there is no usable driver.
int device_count(std::string* why_not = nullptr);

/// Properties of device `ordinal`, or nullopt with the reason (no driver, no such device).
std::optional<DeviceInfo> device_info(int ordinal, std::string* why_not = nullptr);

/// The NVRTC target for a compute capability: "sm_80", "sm_90a" (9.0 and later get the
/// arch-specific "a" variant, whose features - wgmma, setmaxnreg - our kernels use).
std::string arch_for(int cc_major, int cc_minor);

/// What `tilepilot env` and pilot reports record. Missing pieces read "not found: <reason>".
struct EnvironmentInfo {
  std::string tilepilot_version, git_commit, host_compiler, os;
  std::string cuda_toolkit; // CUDA headers the binary was built against, "13.0"
  std::string nvrtc;        // "13.0 (/usr/local/cuda/lib64/libnvrtc.so.13)" or "not found: ..."
  std::string driver;       // "13.0" or "not found: ..."
  std::vector<DeviceInfo> gpus;
  std::string gpu_note; // "" when GPUs were found, else "no GPU: <reason>"
  std::string cublaslt, cudnn;
};

/// Never throws for missing libraries or devices; each field records what it found.
EnvironmentInfo capture_environment();

} // namespace tp::rt
