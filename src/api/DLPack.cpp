// DLPack views in and out. Only dtypes TilePilot has map; fp8 and packed int4 have no DLPack
// code in 0.6 and are refused rather than guessed.
#include <optional>

#include "runtime/Driver.h"
#include "tilepilot/dlpack.h"
#include "tilepilot/error.h"

namespace tp {

namespace {

std::optional<DType> dtype_of(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == kDLFloat && t.bits == 32) return DType::f32;
  if (t.code == kDLFloat && t.bits == 16) return DType::f16;
  if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
  if (t.code == kDLInt && t.bits == 32) return DType::i32;
  if (t.code == kDLUInt && t.bits == 8) return parse_dtype("u8");
  if (t.code == kDLInt && t.bits == 8) return parse_dtype("i8");
  return std::nullopt;
}

DLDataType dl_type(DType t) {
  std::string_view n = dtype_name(t);
  if (n == "f32") return {kDLFloat, 32, 1};
  if (n == "f16") return {kDLFloat, 16, 1};
  if (n == "bf16") return {kDLBfloat, 16, 1};
  if (n == "i32") return {kDLInt, 32, 1};
  if (n == "i8") return {kDLInt, 8, 1};
  if (n == "u8") return {kDLUInt, 8, 1};
  user_error() << "to_dlpack: DLPack has no code for dtype " << n;
  return {};
}

struct Owned {
  DeviceArray array;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};

} // namespace

DeviceTensor from_dlpack(const DLTensor& t) {
  if (t.device.device_type != kDLCUDA)
    user_error() << "from_dlpack: the tensor is on device type " << int(t.device.device_type)
                 << ", not CUDA (" << int(kDLCUDA) << "); move it to the GPU first";
  std::optional<DType> dt = dtype_of(t.dtype);
  if (!dt)
    user_error() << "from_dlpack: DLPack dtype (code " << int(t.dtype.code) << ", "
                 << int(t.dtype.bits) << " bits, " << t.dtype.lanes
                 << " lanes) has no TilePilot dtype; use f32, f16, bf16, i32, i8 or u8";
  if (t.ndim < 0 || (t.ndim > 0 && !t.shape))
    user_error() << "from_dlpack: malformed DLTensor (ndim " << t.ndim << ")";
  int eb = dtype_bytes(*dt);
  if (t.byte_offset % eb != 0)
    user_error() << "from_dlpack: byte offset " << t.byte_offset << " is not a multiple of the "
                 << eb << "-byte element";
  DeviceTensor d;
  d.ptr = reinterpret_cast<uint64_t>(t.data) + t.byte_offset;
  d.dtype = *dt;
  d.shape.assign(t.shape, t.shape + t.ndim);
  if (t.strides) d.strides.assign(t.strides, t.strides + t.ndim);
  return d;
}

DLManagedTensor* to_dlpack(DeviceArray&& a) {
  auto* o = new Owned{std::move(a), {}, {}, {}};
  DeviceTensor v = o->array.tensor();
  o->shape = v.shape;
  o->strides = v.element_strides();
  DLTensor& t = o->managed.dl_tensor;
  t.data = reinterpret_cast<void*>(v.ptr);
  t.device = {kDLCUDA, rt::selected_device_ordinal()};
  t.ndim = static_cast<int>(v.shape.size());
  t.dtype = dl_type(v.dtype);
  t.shape = o->shape.data();
  t.strides = o->strides.data();
  t.byte_offset = 0;
  o->managed.manager_ctx = o;
  o->managed.deleter = [](DLManagedTensor* m) { delete static_cast<Owned*>(m->manager_ctx); };
  return &o->managed;
}

} // namespace tp
