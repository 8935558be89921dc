// device_headers() and device_library_version(): views of the build-time embedded table.
#include "runtime/DeviceHeaders.h"

#include "runtime/Hash.h"

namespace tp::rt {

const std::vector<std::pair<std::string, std::string>>& device_headers() {
  static const auto headers = [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const EmbeddedHeader* h = embedded_device_headers(); h->name; ++h)
      out.emplace_back(h->name, std::string(h->data, h->size));
    return out;
  }();
  return headers;
}

const std::string& device_library_version() {
  static const std::string version = [] {
    FieldHasher h;
    h.add("tilepilot-device-library");
    for (const auto& [name, text] : device_headers())
      h.add(name).add(text);
    return h.hex();
  }();
  return version;
}

} // namespace tp::rt
