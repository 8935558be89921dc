// jit_load / jit_compile_only. Loaded modules are kept for the life of the process in an
// in-process map (key, entry) -> module/function, the warm path: no file I/O, no NVRTC.
#include "runtime/Jit.h"

#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

#include "runtime/Driver.h"
#include "runtime/KernelCache.h"
#include "runtime/ThreadDevice.h"
#include "tilepilot/error.h"

namespace tp::rt {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string key_text(const std::string& canonical_ir, const std::string& source) {
  return canonical_ir + "\n// -- generated source --\n" + source;
}

/// Disk cache, then NVRTC (+ store). Fills compiled, key, cache_hit and the timings.
void compile_through_cache(JitKernel& k, const std::string& source, const std::string& program_name,
                           const std::string& arch, const std::vector<std::string>& options,
                           bool bypass_cache) {
  KernelCache& cache = KernelCache::global();
  if (!bypass_cache) {
    auto t0 = Clock::now();
    auto hit = cache.lookup(k.key);
    k.lookup_seconds += since(t0);
    if (hit) {
      k.compiled = std::move(*hit);
      k.cache_hit = true;
      return;
    }
  }
  k.compiled = nvrtc_compile(source, program_name, arch, options);
  k.nvrtc_seconds = k.compiled.seconds;
  if (!bypass_cache) cache.store(k.key, k.compiled);
}

std::mutex loaded_mutex;
// Keyed by device too: a module belongs to the context it was loaded in, so each device the
// process uses loads its own.
using LoadedKey = std::tuple<int, std::string, std::string>; // (device, cache key, entry)
std::map<LoadedKey, JitKernel>& loaded() {
  static std::map<LoadedKey, JitKernel> m;
  return m;
}

} // namespace

JitKernel jit_compile_only(const std::string& source, const std::string& program_name,
                           const std::string& canonical_ir, const std::string& arch,
                           const std::vector<std::string>& options, bool bypass_cache) {
  JitKernel k;
  k.key = cache_key(key_text(canonical_ir, source), arch, options);
  compile_through_cache(k, source, program_name, arch, options, bypass_cache);
  return k;
}

JitKernel jit_load(const std::string& source, const std::string& entry,
                   const std::string& canonical_ir, const std::string& arch,
                   const std::vector<std::string>& options, bool bypass_cache) {
  CUdevice dev = ensure_context(); // fail before compiling when there is no GPU
  JitKernel k;
  k.key = cache_key(key_text(canonical_ir, source), arch, options);
  if (!bypass_cache) {
    auto t0 = Clock::now();
    std::lock_guard<std::mutex> lock(loaded_mutex);
    auto it = loaded().find({thread_device_ordinal(), k.key, entry});
    if (it != loaded().end()) {
      JitKernel warm = it->second;
      warm.cache_hit = warm.in_process_hit = true;
      warm.nvrtc_seconds = warm.module_load_seconds = 0;
      warm.lookup_seconds = since(t0);
      return warm;
    }
    k.lookup_seconds = since(t0);
  }
  compile_through_cache(k, source, entry, arch, options, bypass_cache);
  internal_assert(!k.compiled.cubin.empty()) << "no cubin for " << entry << " (" << arch << ")";

  Driver& d = driver();
  auto t0 = Clock::now();
  CUresult r = d.cuModuleLoadData(&k.module, k.compiled.cubin.data());
  if (r != CUDA_SUCCESS) {
    int major = 0, minor = 0;
    d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    std::string device_arch = arch_for(major, minor);
    // The usual cause: a cubin for another architecture (SASS does not cross major versions).
    if (device_arch != arch)
      user_error() << "cannot load kernel '" << entry << "': it was compiled for " << arch
                   << " but device " << thread_device_ordinal() << " is " << device_arch
                   << " (cuModuleLoadData: " << cu_error_text(r) << "); compile with --arch "
                   << device_arch;
  }
  check_cu(r, "cuModuleLoadData");
  r = d.cuModuleGetFunction(&k.fn, k.module, entry.c_str());
  if (r != CUDA_SUCCESS) {
    d.cuModuleUnload(k.module);
    user_error() << "kernel '" << entry << "' not found in the compiled module ("
                 << cu_error_text(r) << "); is it declared extern \"C\" __global__?";
  }
  k.module_load_seconds = since(t0);
  if (!bypass_cache) {
    std::lock_guard<std::mutex> lock(loaded_mutex);
    loaded().emplace(LoadedKey{thread_device_ordinal(), k.key, entry}, k);
  }
  return k;
}

} // namespace tp::rt
