// The ordered pass list of the CUDA backend (Lower.cpp). TILEPILOT_DEBUG_IR=1 prints the IR
// after each pass to stderr.
#pragma once
#include "codegen/cuda/LoweredKernel.h"
