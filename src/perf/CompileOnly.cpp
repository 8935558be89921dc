// compile_only: lower_kernel + jit_compile_only (cache bypassed, so NVRTC time is measured now)
// + the ptxas resource report.
#include "perf/CompileOnly.h"
#include "compile/Lower.h"

#include "codegen/cuda/LoweredKernel.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"

namespace tp::perf {

CompileOnly compile_only(const Kernel& k, const std::string& arch) {
  cuda::LoweredKernel lk = cuda::lower_kernel(k, passes::Target::parse(arch));
  rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, arch, {},
                                         /*bypass_cache=*/true);
  rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
  CompileOnly c;
  c.entry = lk.entry;
  c.cuda_source = lk.source;
  c.ptx = j.compiled.ptx;
  c.nvrtc_log = j.compiled.log;
  c.cache_key = j.key;
  c.cubin = j.compiled.cubin;
  c.nvrtc_ms = j.nvrtc_seconds * 1e3;
  c.resources = {{"registers", u.registers},
                 {"shared_bytes", lk.smem_bytes + u.shared_static_bytes},
                 {"dynamic_shared_bytes", lk.smem_bytes},
                 {"static_shared_bytes", u.shared_static_bytes},
                 {"spill_bytes", u.spill_store_bytes + u.spill_load_bytes},
                 {"spill_store_bytes", u.spill_store_bytes},
                 {"spill_load_bytes", u.spill_load_bytes},
                 {"stack_bytes", u.stack_bytes},
                 {"barriers", u.barriers},
                 {"wgmma_serialized", u.wgmma_serialized},
                 {"wgmma_fences_injected", u.wgmma_fences_injected},
                 {"block_threads", lk.block_threads},
                 {"tma", !lk.tmas.empty()}};
  return c;
}

} // namespace tp::perf
