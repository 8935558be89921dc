// The pieces of the `tilepilot._core` extension. The Python package (tilepilot/__init__.py)
// checks types, dtypes and ranks and names the caller's arguments; these functions take
// already-normalized inputs and leave the remaining validation to the core, whose UserErrors
// surface as ValueError.
#pragma once
#include <nanobind/nanobind.h>

namespace tp::py {

/// gemm_host / attention_host: NumPy float32 in and out, the kernel on the CPU interpreter.
void bind_host_ops(nanobind::module_& m);
/// gemm_cuda / attention_cuda (DLPack device tensors through tp::ops dispatch), decide,
/// dispatch counters, cuda_status.
void bind_device_ops(nanobind::module_& m);
/// check_json, ops_json, env_json: the CLI's JSON contracts as strings.
void bind_info(nanobind::module_& m);

} // namespace tp::py
