// The device library (device/**/*.cuh) as embedded into the binary at build time, handed to
// NVRTC as in-memory headers. Include names are paths relative to device/, e.g.
// "tilepilot_device.cuh", "arch/sm90/wgmma.cuh"; NVRTC matches them exactly (no relative
// lookup), so device headers include each other by that full name.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace tp::rt {

/// (include name, contents) of every embedded device header, sorted by name.
const std::vector<std::pair<std::string, std::string>>& device_headers();

/// XXH3-128 hex of all header names and contents: part of every kernel cache key, so a change
/// anywhere in device/ invalidates cached cubins.
const std::string& device_library_version();

/// One embedded file; the table ends with a {nullptr, nullptr, 0} sentinel. Defined in the
/// generated ${build}/generated/device_headers.cpp (src/runtime/EmbedDeviceHeaders.cmake).
struct EmbeddedHeader {
  const char* name;
  const char* data;
  size_t size;
};
const EmbeddedHeader* embedded_device_headers();

} // namespace tp::rt
