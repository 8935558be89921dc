// The tuner's hooks for the CUDA backend. compile runs on the tuner's worker threads and needs
// no GPU: it builds, lowers and compiles one config with NVRTC (through the kernel cache) and
// returns ptxas's resource report. check_correct and measure need a GPU of the target arch; they
// run on every visible GPU of that arch (the selected device first), one tuner worker thread per
// GPU, each with its own primary context, stream and inputs: the first measure of a candidate on
// a GPU loads its module there (a cache hit), then runs are timed with CUDA events, the L2
// flushed before each (runtime/Timing.h); check_correct is the CUDA check against the fp64
// reference (ops::check_cuda). TILEPILOT_TUNE_DEVICES=N measures on the first N of them only.
#pragma once
#include <string>

#include "autotune/Hooks.h"

namespace tp::autotune {

/// Hooks for (op, p) on `arch`, measuring on every GPU of that arch (devices_note lists them and
/// any GPU left out). Without a GPU of that arch, measure and check_correct are empty
/// and why_no_measure says why; compile still works (a compile-only check). `op` must outlive
/// every compile the tuner starts (operators from ops::find_operator live for the process).
TuneHooks cuda_tune_hooks(const ops::Operator& op, const ops::Problem& p, const std::string& arch);

/// The number of devices TILEPILOT_TUNE_DEVICES (`value`, null or empty when unset) asks for, out
/// of `available` (-1: not known, only the syntax is checked); `available` when unset. User
/// error unless it is a whole number from 1 to `available`.
int tune_device_limit(const char* value, int available);

/// Makes cuda_tune_hooks the default factory (set_default_hooks) unless a factory is registered
/// already (a test's fakes, an embedding application's own). Called explicitly from main() and
/// pilot::default_backends(): a self-registering static initialiser in this static library
/// would be dropped by the linker.
void register_cuda_tune_hooks();

} // namespace tp::autotune
