// NVRTC entry points resolved with dlsym from the first library that loads (see
// DynamicLibrary.h for the search order), and the compile call built on them.
#include "runtime/Nvrtc.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <nvrtc.h>
#include <optional>
#include <sstream>

#include "runtime/DeviceHeaders.h"
#include "runtime/DynamicLibrary.h"
#include "tilepilot/error.h"

namespace tp::rt {

namespace {

#define TILEPILOT_NVRTC_FUNCS(X)                                                                   \
  X(nvrtcVersion)                                                                                  \
  X(nvrtcGetErrorString)                                                                           \
  X(nvrtcCreateProgram)                                                                            \
  X(nvrtcDestroyProgram)                                                                           \
  X(nvrtcCompileProgram)                                                                           \
  X(nvrtcGetPTXSize)                                                                               \
  X(nvrtcGetPTX)                                                                                   \
  X(nvrtcGetCUBINSize)                                                                             \
  X(nvrtcGetCUBIN)                                                                                 \
  X(nvrtcGetProgramLogSize)                                                                        \
  X(nvrtcGetProgramLog)

struct Nvrtc {
#define TILEPILOT_X(n) decltype(&::n) n = nullptr;
  TILEPILOT_NVRTC_FUNCS(TILEPILOT_X)
#undef TILEPILOT_X
  DynamicLibrary lib;
  int major = 0, minor = 0;
};

/// NVRTC's own cache must be off before any library of the process loads NVRTC: cuBLASLt and
/// cuDNN bring it in as a dependency, and it reads the setting when it is loaded. So it is set
/// when this library's statics initialize, before main() (and again in load(), harmlessly).
const bool kNvrtcCacheOff = [] {
  setenv("CUDA_CACHE_DISABLE", "1", /*overwrite=*/0);
  return true;
}();

/// The loaded NVRTC, or nullopt with the reason; loaded once per process.
const std::optional<Nvrtc>& load(std::string* why_not) {
  static std::optional<Nvrtc> nvrtc;
  static std::string reason;
  static std::once_flag once;
  std::call_once(once, [] {
    // NVRTC 12.9+ keeps its own on-disk cache of compiled programs (it honours the driver's
    // CUDA_CACHE_DISABLE). A hit there skips ptxas, so the log has no resource report
    // (registers, spills, serialized wgmma) and a "cold" compile is not one: on the H200 (runs
    // s8, s10) such hits took 30-60 ms and read as -1 registers. TilePilot has its own kernel
    // cache (KernelCache) keyed on the IR, so NVRTC's is turned off unless the user set it.
    setenv("CUDA_CACHE_DISABLE", "1", /*overwrite=*/0);
    std::string tried;
    auto lib = open_library(
        cuda_library_candidates({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}), &tried);
    if (!lib) {
      reason = "NVRTC (the CUDA runtime compiler) was not found. Tried:\n" + tried +
               "\nInstall the CUDA toolkit or set CUDA_HOME to its root (the library is "
               "$CUDA_HOME/lib64/libnvrtc.so.*).";
      return;
    }
    Nvrtc n;
    n.lib = *lib;
#define TILEPILOT_X(f)                                                                             \
  n.f = reinterpret_cast<decltype(n.f)>(lib->symbol(#f));                                          \
  if (!n.f) {                                                                                      \
    reason = lib->path + " has no symbol " #f "; it is not a usable NVRTC";                        \
    return;                                                                                        \
  }
    TILEPILOT_NVRTC_FUNCS(TILEPILOT_X)
#undef TILEPILOT_X
    n.nvrtcVersion(&n.major, &n.minor);
    nvrtc = std::move(n);
  });
  if (!nvrtc && why_not) *why_not = reason;
  return nvrtc;
}

const Nvrtc& nvrtc() {
  std::string why;
  const auto& n = load(&why);
  if (!n) user_error() << why;
  return *n;
}

/// The first `max_lines` lines of `log`, noting how many were left out.
std::string head(const std::string& log, int max_lines) {
  std::istringstream in(log);
  std::string out, line;
  int n = 0, total = 0;
  while (std::getline(in, line)) {
    if (n < max_lines) {
      out += "  " + line + "\n";
      ++n;
    }
    ++total;
  }
  if (total > n) out += "  ... (" + std::to_string(total - n) + " more lines)\n";
  return out;
}

bool has_option(const std::vector<std::string>& options, std::initializer_list<const char*> pre) {
  for (const std::string& o : options)
    for (const char* p : pre)
      if (o.rfind(p, 0) == 0) return true;
  return false;
}

/// Whether the loaded NVRTC accepts -minimal (added in 12.4); false when NVRTC is missing.
bool nvrtc_supports_minimal() {
  const auto& n = load(nullptr);
  return n && (n->major > 12 || (n->major == 12 && n->minor >= 4));
}

} // namespace

std::vector<std::string> nvrtc_effective_options(const std::string& arch,
                                                 const std::vector<std::string>& options) {
  std::vector<std::string> out{"-arch=" + arch};
  out.insert(out.end(), options.begin(), options.end());
  if (!has_option(options, {"-std", "--std"})) out.push_back("-std=c++17");
  // Generated code and the device library mark nothing __device__ explicitly.
  if (!has_option(options, {"-default-device", "--device-as-default-execution-space"}))
    out.push_back("-default-device");
  // Resource usage (registers, spills, smem) is read from ptxas' verbose lines in the log.
  if (!has_option(options, {"-Xptxas=-v", "--ptxas-options=-v"})) out.push_back("-Xptxas=-v");
  // -minimal drops NVRTC's texture/surface, device-runtime and launch declarations from its
  // builtin prelude, which generated code never uses: 20-35 ms less front end per kernel, and
  // every built-in operator's default cubin is byte-identical with it (docs/compile-time.md).
  // NVRTC before 12.4 does not know the option.
  if (!has_option(options, {"-minimal", "--minimal"}) && nvrtc_supports_minimal())
    out.push_back("-minimal");
  return out;
}

CompileOutput nvrtc_compile(const std::string& source, const std::string& program_name,
                            const std::string& arch, const std::vector<std::string>& options) {
  const Nvrtc& api = nvrtc();
  auto t0 = std::chrono::steady_clock::now();
  const auto& headers = device_headers();
  std::vector<const char*> header_text, header_names;
  for (const auto& [name, text] : headers) {
    header_names.push_back(name.c_str());
    header_text.push_back(text.c_str());
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r =
      api.nvrtcCreateProgram(&prog, source.c_str(), program_name.c_str(), int(headers.size()),
                             header_text.data(), header_names.data());
  if (r != NVRTC_SUCCESS)
    user_error() << "nvrtcCreateProgram failed for '" << program_name
                 << "': " << api.nvrtcGetErrorString(r);
  // Destroys the program on every path out, including a throw.
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) {
    if (const auto& n = load(nullptr)) n->nvrtcDestroyProgram(p);
  });

  std::vector<std::string> opts = nvrtc_effective_options(arch, options);
  std::vector<const char*> opt_ptrs;
  for (const std::string& o : opts)
    opt_ptrs.push_back(o.c_str());
  r = api.nvrtcCompileProgram(prog, int(opt_ptrs.size()), opt_ptrs.data());

  CompileOutput out;
  size_t n = 0;
  api.nvrtcGetProgramLogSize(prog, &n);
  out.log.resize(n);
  if (n) api.nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && out.log.back() == '\0')
    out.log.pop_back();

  if (r != NVRTC_SUCCESS) {
    std::string opt_text;
    for (const std::string& o : opts)
      opt_text += " " + o;
    user_error() << "NVRTC " << api.major << "." << api.minor << " failed to compile '"
                 << program_name << "' for " << arch << " (" << api.nvrtcGetErrorString(r)
                 << ")\noptions:" << opt_text << "\nNVRTC log:\n"
                 << head(out.log, 60)
                 << (out.log.find("Insufficient registers") != std::string::npos
                         ? "ptxas ran out of registers under the kernel's launch bound: each "
                           "thread may use 65536 / (block threads x blocks_per_sm), rounded down "
                           "to 8; use smaller tiles, fewer threads or blocks_per_sm = 1.\n"
                         : "")
                 << "To see the whole generated source: tilepilot show OP --stage cuda (OP is the "
                    "operator that produced '"
                 << program_name << "')";
  }

  api.nvrtcGetPTXSize(prog, &n);
  out.ptx.resize(n);
  if (n) api.nvrtcGetPTX(prog, out.ptx.data());
  while (!out.ptx.empty() && out.ptx.back() == '\0')
    out.ptx.pop_back();
  // A virtual arch (compute_XX) yields PTX only; asking for its cubin is an error we skip.
  if (arch.rfind("sm_", 0) == 0) {
    r = api.nvrtcGetCUBINSize(prog, &n);
    internal_assert(r == NVRTC_SUCCESS)
        << "nvrtcGetCUBINSize for " << arch << ": " << api.nvrtcGetErrorString(r);
    out.cubin.resize(n);
    if (n) api.nvrtcGetCUBIN(prog, out.cubin.data());
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

bool nvrtc_available(std::string* why_not) {
  return load(why_not).has_value();
}

std::string nvrtc_version() {
  const Nvrtc& n = nvrtc();
  return std::to_string(n.major) + "." + std::to_string(n.minor);
}

std::string nvrtc_library_path() {
  return nvrtc().lib.path;
}

} // namespace tp::rt
