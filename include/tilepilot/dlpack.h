// DLPack interop (the Debian package libdlpack-dev, DLPack 0.6+): tensors from PyTorch, JAX
// or CuPy become DeviceTensors without a copy, and DeviceArrays can be handed out.
#pragma once
#include <dlpack/dlpack.h>

#include "tilepilot/device.h"

namespace tp {

/// A view of a CUDA DLTensor. UserError for a CPU tensor, a dtype TilePilot lacks, lanes != 1
/// or a byte offset that breaks element alignment. Null strides mean contiguous.
DeviceTensor from_dlpack(const DLTensor& t);
/// Hands `a` over to a DLPack consumer, which calls the deleter when done with it.
DLManagedTensor* to_dlpack(DeviceArray&& a);

} // namespace tp
