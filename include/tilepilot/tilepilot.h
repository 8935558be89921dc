// TilePilot umbrella header: the tile language, host and device tensors, compiling and
// launching a kernel, the CPU interpreter, timing, and what the machine offers. DLPack interop
// is in tilepilot/dlpack.h (it needs the DLPack headers).
#pragma once
#include "tilepilot/compile.h"
#include "tilepilot/device.h"
#include "tilepilot/dtype.h"
#include "tilepilot/error.h"
#include "tilepilot/expr.h"
#include "tilepilot/interpret.h"
#include "tilepilot/lang.h"
#include "tilepilot/runtime.h"
#include "tilepilot/tensor.h"
#include "tilepilot/timing.h"
