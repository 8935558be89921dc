// From CUDA source to a loaded kernel: in-process cache -> disk cache -> NVRTC -> store ->
// cuModuleLoadData -> cuModuleGetFunction. Code generation happens before and is not timed here.
#pragma once
#include <cuda.h>
#include <string>
#include <vector>

#include "runtime/Nvrtc.h"

namespace tp::rt {

struct JitKernel {
  CUmodule module = nullptr; // null from jit_compile_only
  CUfunction fn = nullptr;
  CompileOutput compiled; // compiled.seconds is the original NVRTC time, even on a cache hit
  std::string key;        // the kernel cache key
  bool cache_hit = false; // found on disk or in this process; NVRTC did not run
  bool in_process_hit = false;
  double lookup_seconds = 0;      // cache lookups (memory and disk)
  double nvrtc_seconds = 0;       // NVRTC in this call; 0 on a hit
  double module_load_seconds = 0; // cuModuleLoadData + cuModuleGetFunction
};

/// Loads `entry` (an extern "C" kernel in `source`) for the current device. The cache key is
/// cache_key(canonical_ir + source, arch, options): the source is included so that a change in
/// code generation can never return a stale cubin. `bypass_cache` skips every cache, read and
/// write, and always compiles (cold-compile measurements); the module then belongs to the
/// caller (cuModuleUnload). Otherwise modules stay loaded for the life of the process.
JitKernel jit_load(const std::string& source, const std::string& entry,
                   const std::string& canonical_ir, const std::string& arch,
                   const std::vector<std::string>& options, bool bypass_cache = false);

/// The same up to the cubin, with no driver and no GPU: for CI and `tilepilot show --stage
/// ptx|resources`. `program_name` names the program in NVRTC errors.
JitKernel jit_compile_only(const std::string& source, const std::string& program_name,
                           const std::string& canonical_ir, const std::string& arch,
                           const std::vector<std::string>& options, bool bypass_cache = false);

} // namespace tp::rt
