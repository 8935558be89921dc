// Compile-on-demand and launch of generated kernels, with tensor-map encoding for TMA.
#include "compile/CudaKernel.h"
#include "compile/Lower.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "ir/ArgBinding.h"
#include "runtime/DeviceFaults.h"
#include "runtime/Driver.h"
#include "runtime/Launch.h"
#include "runtime/ResourceUsage.h"

namespace tp::cuda {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// TMA moves bytes: every 1-byte type is UINT8 (TMA has no signed 8-bit or fp8 type, and the
/// out-of-bounds fill is zero bytes, which is 0 in each of them). int4 tensors are never
/// TMA-loaded (nothing shares their dtype).
CUtensorMapDataType tma_dtype(DType t) {
  switch (t) {
  case DType::bf16:
    return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  case DType::f16:
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  case DType::f32:
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  case DType::i32:
    return CU_TENSOR_MAP_DATA_TYPE_INT32;
  case DType::boolean:
  case DType::i8:
  case DType::u8:
  case DType::fp8_e4m3:
  case DType::fp8_e5m2:
    return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  case DType::int4:
    break;
  }
  internal_assert(false) << "no TMA data type for " << dtype_name(t);
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

CUtensorMap encode(const TmaParam& p, const DeviceTensor& t) {
  rt::Driver& d = rt::driver();
  if (!d.cuTensorMapEncodeTiled)
    user_error() << "this CUDA driver has no cuTensorMapEncodeTiled; TMA kernels need driver 12.0+";
  int rank = static_cast<int>(t.shape.size());
  int eb = dtype_bytes(t.dtype);
  cuuint64_t dims[5], strides[5];
  cuuint32_t box[5], elem[5];
  for (int i = 0; i < rank; ++i) {
    dims[i] = static_cast<cuuint64_t>(t.shape[rank - 1 - i]);
    box[i] = static_cast<cuuint32_t>(p.box[i]);
    elem[i] = 1;
  }
  cuuint64_t stride = static_cast<cuuint64_t>(eb);
  for (int i = 0; i < rank - 1; ++i) {
    stride *= dims[i];
    // globalStrides[i] is the byte stride of dimension i + 1, innermost first.
    strides[i] = t.strides.empty() ? stride : static_cast<cuuint64_t>(t.strides[rank - 2 - i]) * eb;
  }
  CUtensorMapSwizzle sw = p.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                          : p.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                          : p.swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                  : CU_TENSOR_MAP_SWIZZLE_NONE;
  CUtensorMap map;
  TILEPILOT_CU(d.cuTensorMapEncodeTiled(
      &map, tma_dtype(t.dtype), rank, reinterpret_cast<void*>(t.ptr), dims, strides, box, elem,
      CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

/// Blocks of `fn` that one SM holds at once (shared memory, threads and registers), times the
/// SM count: the grid of a persistent kernel. More would only queue; fewer would idle SMs.
unsigned persistent_grid(CUfunction fn, int threads, int64_t smem) {
  rt::Driver& d = rt::driver();
  CUdevice dev = rt::ensure_context();
  int sms = 0, smem_sm = 0, regs = 0;
  TILEPILOT_CU(d.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  TILEPILOT_CU(d.cuDeviceGetAttribute(
      &smem_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev));
  TILEPILOT_CU(d.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
  int64_t per_sm = 2048 / threads;
  // Each block also reserves 1 KB of shared memory for the system.
  per_sm = std::min<int64_t>(per_sm, smem_sm / (smem + 1024));
  if (regs > 0) per_sm = std::min<int64_t>(per_sm, 65536 / (int64_t{threads} * regs));
  return static_cast<unsigned>(std::max<int64_t>(1, per_sm) * std::max(1, sms));
}

} // namespace

CudaKernel::CudaKernel(Kernel k, std::string arch, bool bypass_cache)
    : kernel_(std::move(k)), arch_(std::move(arch)), bypass_cache_(bypass_cache) {}

uint64_t CudaKernel::view_params(const std::vector<DeviceTensor>& args) const {
  uint64_t m = 0;
  const ir::KernelNode& k = kernel_.node();
  for (size_t i = 0; i < k.params.size() && i < 64 && i < args.size(); ++i) {
    if (!k.params[i]->strides.empty() && !args[i].contiguous()) m |= uint64_t{1} << i;
  }
  return m;
}

const LoweredKernel& CudaKernel::lowered(const VariantKey& key) {
  Variant& v = variants_[key];
  if (!v.lowered) {
    passes::Target t = passes::Target::parse(arch_);
    std::tie(t.allow_tma, t.view_params, t.even_rows, t.tma_store_params) = key;
    v.lowered = std::make_unique<LoweredKernel>(lower_kernel(kernel_, t));
  }
  return *v.lowered;
}

CudaKernel::Variant& CudaKernel::variant(const VariantKey& key) {
  Variant& v = variants_[key];
  if (v.ready) return v;
  auto t0 = std::chrono::steady_clock::now();
  lowered(key);
  v.timings.passes = seconds_since(t0);
  v.jit = rt::jit_load(v.lowered->source, v.lowered->entry, v.lowered->canonical_ir, arch_, {},
                       bypass_cache_);
  v.timings.nvrtc = v.jit.nvrtc_seconds;
  v.timings.module_load = v.jit.module_load_seconds;
  v.timings.lookup = v.jit.lookup_seconds;
  v.timings.cache_hit = v.jit.cache_hit;
  v.timings.registers = rt::resource_usage(v.jit.compiled.log, v.lowered->entry).registers;
  v.ready = true;
  return v;
}

const LoweredKernel& CudaKernel::lowered(bool tma) {
  return lowered(VariantKey{tma, 0, 0, ~uint64_t{0}});
}

uint64_t CudaKernel::even_shapes(const std::vector<ir::ArgDesc>& desc) {
  // Which parameters take paired stores does not depend on the variant: any one's list will do.
  // A TMA-store candidate is paired-stored in the variants that store it from registers.
  const LoweredKernel& lk = lowered(true);
  const uint64_t paired = lk.paired_params | lk.tma_store_candidates;
  return paired ? even_row_params(paired, desc) : 0;
}

uint64_t CudaKernel::even_rows(const std::vector<DeviceTensor>& args, uint64_t even_shapes) {
  uint64_t m = even_shapes;
  // A contiguous tensor may still start at an odd element (a slice passed as its own tensor).
  for (size_t i = 0; m && i < args.size() && i < 64; ++i)
    if (args[i].ptr % (2 * static_cast<uint64_t>(dtype_bytes(args[i].dtype))) != 0)
      m &= ~(uint64_t{1} << i);
  return m;
}

namespace {

/// Whether TMA can address tensor `t`: a 16-byte aligned base, and rows as tma_rows says.
bool tma_addressable(const DeviceTensor& t) {
  return t.ptr % 16 == 0 && tma_rows({t.dtype, t.shape, t.strides});
}

} // namespace

bool CudaKernel::wants_tma(const std::vector<DeviceTensor>& args) {
  // Which tensors TMA loads does not depend on views: any variant's list will do. TMA-stored
  // tensors choose their own bit (tma_stores).
  const LoweredKernel& lk = lowered(true);
  for (const TmaParam& p : lk.tmas)
    if (!p.store && !tma_addressable(args.at(p.param))) return false;
  return true;
}

uint64_t CudaKernel::tma_stores(const std::vector<DeviceTensor>& args) {
  uint64_t m = ~uint64_t{0};
  const uint64_t candidates = lowered(true).tma_store_candidates;
  for (size_t i = 0; i < args.size() && i < 64; ++i)
    if (((candidates >> i) & 1) && !tma_addressable(args[i])) m &= ~(uint64_t{1} << i);
  return m;
}

const CompileTimings& CudaKernel::prepare(const std::vector<DeviceTensor>& args) {
  std::vector<ir::ArgDesc> desc;
  for (const DeviceTensor& t : args)
    desc.push_back({t.dtype, t.shape, t.strides});
  const bool tma = wants_tma(args);
  return variant({tma, view_params(args), even_rows(args, even_shapes(desc)),
                  tma ? tma_stores(args) : ~uint64_t{0}})
      .timings;
}

void CudaKernel::launch(const std::vector<DeviceTensor>& args, CUstream stream) {
  launch(args, {}, stream);
}

bool CudaKernel::Bound::same(const std::vector<DeviceTensor>& args,
                             const std::vector<double>& sc) const {
  if (!valid || !reuse || args.size() != desc.size() || sc != scalars) return false;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].dtype != desc[i].dtype || args[i].shape != desc[i].shape ||
        args[i].strides != desc[i].strides)
      return false;
  return true;
}

void CudaKernel::bind(const std::vector<DeviceTensor>& args, const std::vector<double>& scalars) {
  const ir::KernelNode& k = kernel_.node();
  bound_.valid = false; // until every check below has passed
  std::vector<ir::ArgDesc>& desc = bound_.desc;
  desc.clear();
  for (const DeviceTensor& t : args)
    desc.push_back({t.dtype, t.shape, t.strides});
  ir::Binding env = ir::bind_args(k, desc);
  ir::bind_scalars(k, scalars, env);
  for (size_t i = 0; i < args.size(); ++i) {
    // The largest element offset the kernel may form (32-bit index arithmetic).
    std::vector<int64_t> st = ir::element_strides(desc[i]);
    int64_t last = 0;
    for (size_t d = 0; d < st.size(); ++d)
      last += (args[i].shape[d] - 1) * st[d];
    if (last >= (int64_t{1} << 31) - 1)
      user_error() << "kernel '" << k.name << "': tensor '" << k.params[i]->name
                   << "' reaches element offset " << last
                   << "; generated kernels index with 32-bit integers (at most 2^31 - 2)";
  }
  bound_.grid = {1, 1, 1};
  for (size_t i = 0; i < k.grid.size(); ++i) {
    int64_t g = ir::eval_int(k.grid[i], env);
    if (g <= 0 || g > (i == 0 ? 2147483647LL : 65535LL))
      user_error() << "kernel '" << k.name << "': grid dimension " << i << " is " << g
                   << " for these shapes, outside what CUDA launches";
    bound_.grid[i] = static_cast<unsigned>(g);
  }
  bound_.dims.clear();
  for (const Var& d : k.dims)
    bound_.dims.push_back(static_cast<int>(env.at(ir::as<ir::Variable>(d)->uid)));
  bound_.strides.clear();
  for (const ir::Buffer& b : k.params)
    for (const Expr& st : b->strides)
      bound_.strides.push_back(static_cast<int>(env.at(ir::as<ir::Variable>(st)->uid)));
  bound_.scalars = scalars;
  bound_.even_shapes = even_shapes(desc);
  bound_.valid = true;
}

void CudaKernel::launch(const std::vector<DeviceTensor>& args, const std::vector<double>& scalars,
                        CUstream stream) {
  const ir::KernelNode& k = kernel_.node();
  if (scalars.size() != k.scalars.size())
    user_error() << "kernel '" << k.name << "' takes " << k.scalars.size()
                 << " scalar arguments, got " << scalars.size();
  if (!bound_.same(args, scalars)) bind(args, scalars);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].ptr == 0)
      user_error() << "kernel '" << k.name << "': tensor '" << k.params[i]->name
                   << "' has a null device pointer";
    // Vector copies and paired stores assume an aligned base; a dense allocation always is.
    if (!k.params[i]->strides.empty() && args[i].ptr % 16 != 0)
      user_error() << "kernel '" << k.name << "': strided tensor '" << k.params[i]->name
                   << "' starts at an address that is not 16-byte aligned (address % 16 = "
                   << args[i].ptr % 16 << "); pass a view whose first element is 16-byte aligned";
  }
  const bool tma = wants_tma(args);
  Variant& v = variant({tma, view_params(args), even_rows(args, bound_.even_shapes),
                        tma ? tma_stores(args) : ~uint64_t{0}});
  std::array<unsigned, 3> grid = bound_.grid;
  // A tensor map depends only on its tensor's address, shape, strides and dtype: reuse the last
  // launch's maps when those are unchanged (the common case of a hot kernel called on the same
  // buffers), instead of encoding every map on every launch.
  bool same_maps = v.maps.size() == v.lowered->tmas.size();
  for (size_t i = 0; same_maps && i < v.lowered->tmas.size(); ++i) {
    const DeviceTensor &a = args.at(v.lowered->tmas[i].param), &b = v.map_args[i];
    same_maps =
        a.ptr == b.ptr && a.dtype == b.dtype && a.shape == b.shape && a.strides == b.strides;
  }
  if (!same_maps) {
    v.maps.clear();
    v.map_args.clear();
    for (const TmaParam& p : v.lowered->tmas) {
      v.maps.push_back(encode(p, args.at(p.param)));
      v.map_args.push_back(args.at(p.param));
    }
  }
  std::vector<CUdeviceptr> ptrs;
  for (const DeviceTensor& t : args)
    ptrs.push_back(t.ptr);
  // The driver copies the parameter values at the launch: bound_'s own vectors can be passed.
  std::vector<int>&dims = bound_.dims, &strides = bound_.strides;
  std::vector<void*> params;
  for (auto& p : ptrs)
    params.push_back(&p);
  for (auto& m : v.maps)
    params.push_back(&m);
  for (auto& d : dims)
    params.push_back(&d);
  // Scalars by value (4 bytes each: float or int), then the strided tensors' strides.
  std::vector<uint32_t> scalar_bits(k.scalars.size());
  for (size_t i = 0; i < scalars.size(); ++i) {
    if (k.scalars[i].dtype() == DType::f32) {
      float f = static_cast<float>(scalars[i]);
      std::memcpy(&scalar_bits[i], &f, 4);
    } else {
      int v = static_cast<int>(scalars[i]);
      std::memcpy(&scalar_bits[i], &v, 4);
    }
  }
  for (auto& b : scalar_bits)
    params.push_back(&b);
  for (auto& st : strides)
    params.push_back(&st);
  rt::LaunchConfig cfg;
  cfg.block = {static_cast<unsigned>(v.lowered->block_threads), 1, 1};
  cfg.shared_bytes = static_cast<unsigned>(v.lowered->smem_bytes);
  cfg.stream = stream;
  CUdeviceptr sched = 0;
  const unsigned c = static_cast<unsigned>(std::max(1, v.lowered->cluster_y));
  if (v.lowered->persistent) {
    // The kernel walks its own grid as tiles; launch what the GPU holds at once (at most one
    // block per tile). The counter starts at zero and the kernel's last block leaves it so.
    // In clusters of c, a tile is a column of c blocks (the kernel rounds its rows up to whole
    // clusters) and the launch is along x, in whole clusters.
    if (c > 1) cfg.cluster = {c, 1, 1};
    if (!v.persistent_grid_cap) {
      v.persistent_grid_cap =
          persistent_grid(v.jit.fn, v.lowered->block_threads, v.lowered->smem_bytes);
      if (c > 1) {
        rt::LaunchConfig probe = cfg;
        probe.grid = {v.persistent_grid_cap / c * c, 1, 1};
        const int clusters = rt::max_active_clusters(v.jit.fn, probe);
        v.persistent_grid_cap = clusters > 0 ? static_cast<unsigned>(clusters) * c
                                             : std::max(c, v.persistent_grid_cap / c * c);
      }
    }
    uint64_t tiles = uint64_t{grid[0]} * ((grid[1] + c - 1) / c) * grid[2];
    if (tiles >= (uint64_t{1} << 31))
      user_error() << "kernel '" << k.name << "': " << tiles
                   << " tiles for these shapes; a persistent kernel counts them in 32 bits";
    grid = {static_cast<unsigned>(std::min<uint64_t>(tiles * c, v.persistent_grid_cap)), 1, 1};
    auto it = sched_.find(stream);
    if (it == sched_.end()) {
      rt::DeviceBuffer b(2 * sizeof(int));
      b.memset32(0);
      it = sched_.emplace(stream, std::move(b)).first;
    }
    sched = it->second.ptr();
    params.push_back(&sched);
  } else if (c > 1) {
    // Pairs of blocks along y: the spare block of an odd count loads zeros and stores nothing.
    grid[1] = (grid[1] + c - 1) / c * c;
    if (grid[1] > 65535)
      user_error() << "kernel '" << k.name << "': grid dimension 1 is " << grid[1]
                   << " after rounding up to the cluster of " << c
                   << ", outside what CUDA launches";
    cfg.cluster = {1, c, 1};
  }
  cfg.grid = grid;
  rt::launch(v.jit.fn, cfg, params.data());
  rt::note_launch(k.name, cfg); // what a fault reported by a later call names
}

} // namespace tp::cuda
