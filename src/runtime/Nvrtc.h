// NVRTC, loaded at run time: compiles generated CUDA C++ (plus the embedded device library) to
// PTX and a cubin for one architecture. Needs no GPU and no driver.
#pragma once
#include <string>
#include <vector>

namespace tp::rt {

struct CompileOutput {
  std::string ptx;
  std::vector<char> cubin; // empty when `arch` is virtual (compute_XX)
  std::string log;         // NVRTC log, including ptxas -v resource lines (see ResourceUsage.h)
  double seconds = 0;      // wall time of program creation + compilation + retrieval
};

/// Compiles `source` for `arch` ("sm_90a", "sm_80"). The options actually used are
/// nvrtc_effective_options(arch, options). Throws a UserError naming the program, the arch and
/// the start of the NVRTC log when compilation fails, or when NVRTC cannot be loaded.
CompileOutput nvrtc_compile(const std::string& source, const std::string& program_name,
                            const std::string& arch, const std::vector<std::string>& options);

/// `-arch=<arch>`, then `options`, then each default the caller did not set itself:
/// -std=c++17, -default-device, -Xptxas=-v (resource usage lands in the log), and -minimal
/// where the loaded NVRTC supports it (a smaller builtin prelude; the cubin is unchanged).
std::vector<std::string> nvrtc_effective_options(const std::string& arch,
                                                 const std::vector<std::string>& options);

/// Whether NVRTC can be loaded; if not and `why_not` is given, what was tried.
bool nvrtc_available(std::string* why_not = nullptr);

/// "13.0". Throws a UserError when NVRTC is missing.
std::string nvrtc_version();

/// The file NVRTC was loaded from. Throws a UserError when NVRTC is missing.
std::string nvrtc_library_path();

} // namespace tp::rt
