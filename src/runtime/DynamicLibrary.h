// Run-time loading of CUDA libraries (driver, NVRTC, cuBLASLt, cuDNN) with dlopen, so that the
// binary starts on machines that lack them and can say exactly what it looked for.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace tp::rt {

/// An open shared library. Never closed: CUDA libraries are not safe to unload mid-process.
struct DynamicLibrary {
  void* handle = nullptr;
  std::string path; // the file the loader picked, e.g. /usr/local/cuda/lib64/libnvrtc.so.13
  void* symbol(const char* name) const;
};

/// Tries each candidate with dlopen in order. On failure returns nullopt and, if `why_not` is
/// given, the loader's message for each candidate, one per line.
std::optional<DynamicLibrary> open_library(const std::vector<std::string>& candidates,
                                           std::string* why_not);

/// `names` as given (found through LD_LIBRARY_PATH, the binary's RUNPATH and ld.so.cache),
/// preceded by $CUDA_HOME/lib64/<name> when CUDA_HOME is set (an explicit choice wins) and
/// followed by /usr/local/cuda/lib64/<name>.
std::vector<std::string> cuda_library_candidates(const std::vector<std::string>& names);

} // namespace tp::rt
