// The pieces of the `tilepilot._core` extension. The Python package (tilepilot/__init__.py)
// checks types, dtypes and ranks and names the caller's arguments; these functions take
// already-normalized inputs and leave the remaining validation to the core, whose UserErrors
// surface as ValueError.
#pragma once
#include <nanobind/nanobind.h>

namespace tp::py {

/// run_host: any operator on NumPy float32 arrays, the kernel on the CPU interpreter.
void bind_host_ops(nanobind::module_& m);
/// run_cuda (any operator on DLPack device tensors through tp::ops dispatch), decide,
/// dispatch counters, cuda_status.
void bind_device_ops(nanobind::module_& m);
/// check_json, ops_json, env_json: the CLI's JSON contracts as strings.
void bind_info(nanobind::module_& m);
/// load_plugin, load_env_plugins, describe_call: plug-ins' operators from Python.
void bind_plugin_ops(nanobind::module_& m);

} // namespace tp::py
