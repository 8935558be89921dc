// TilePilot umbrella header: the tile language, host tensors, the interpreter and the runtime.
#pragma once
#include "tilepilot/dtype.h"
#include "tilepilot/error.h"
#include "tilepilot/expr.h"
#include "tilepilot/lang.h"
