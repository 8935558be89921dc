// Environment capture for `tilepilot env` and pilot reports: versions of everything that can
// change a result (TilePilot, compiler, CUDA toolkit, NVRTC, driver, GPUs, cuBLASLt, cuDNN).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "tilepilot/runtime.h"

namespace tp::rt {

nlohmann::json to_json(const DeviceInfo& d);
nlohmann::json to_json(const EnvironmentInfo& e);
/// The shorter JSON of `tilepilot env --json`, which the Python package's tilepilot.env() also
/// returns: one contract for both (key names differ from to_json's, which reports carry).
nlohmann::json to_env_json(const EnvironmentInfo& e);

/// Human-readable, one "key: value" line per item (GPUs indented below).
std::string to_text(const EnvironmentInfo& e);

/// Version of a vendor library found at run time, or "not found: <reason>". cuBLASLt:
/// libcublasLt.so.13/.12; cuDNN: $TILEPILOT_CUDNN_PATH, else libcudnn.so.9.
std::string cublaslt_version();
std::string cudnn_version();

} // namespace tp::rt
