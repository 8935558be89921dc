// TilePilot device library umbrella: what generated kernels include (as "tilepilot_device.cuh").
//
// Compiles under NVRTC with no CUDA toolkit headers. Layers: types.cuh (element types,
// conversions, per-thread math, barriers, shuffles); arch/sm80 (mma.sync, ldmatrix, cp.async);
// arch/sm90 (wgmma, TMA, mbarrier, fences, setmaxnreg, stmatrix, clusters), included only when
// compiling for sm_90 or newer; tile/ (swizzle functions, no PTX).
#pragma once

#include "arch/sm80/cp_async.cuh"
#include "arch/sm80/ldmatrix.cuh"
#include "arch/sm80/mma.cuh"
#include "arch/sm80/mma_layout.cuh"
#include "defs.cuh"
#include "tile/codegen.cuh"
#include "tile/row_lanes.cuh"
#include "tile/swizzle.cuh"
#include "types.cuh"

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#include "arch/sm90/cluster.cuh"
#include "arch/sm90/fence.cuh"
#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/setmaxnreg.cuh"
#include "arch/sm90/smem_desc.cuh"
#include "arch/sm90/stmatrix.cuh"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/wgmma.cuh"
#endif
