// dlopen with a record of what was tried, and the CUDA library search order.
#include "runtime/DynamicLibrary.h"

#include <cstdlib>
#include <dlfcn.h>
#include <link.h>

namespace tp::rt {

void* DynamicLibrary::symbol(const char* name) const {
  return handle ? dlsym(handle, name) : nullptr;
}

std::optional<DynamicLibrary> open_library(const std::vector<std::string>& candidates,
                                           std::string* why_not) {
  std::string tried;
  for (const std::string& name : candidates) {
    // RTLD_LOCAL: the libraries' own symbols must not interpose on each other or on ours.
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) {
      DynamicLibrary lib{h, name};
      link_map* map = nullptr;
      if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
        lib.path = map->l_name;
      return lib;
    }
    const char* err = dlerror(); // names the file: "libcuda.so.1: cannot open shared object..."
    tried += std::string(tried.empty() ? "" : "\n") + (err ? err : name + ": not found");
  }
  if (why_not) *why_not = tried;
  return std::nullopt;
}

std::vector<std::string> cuda_library_candidates(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  const char* home = std::getenv("CUDA_HOME");
  std::string home_dir = home && *home ? std::string(home) + "/lib64/" : "";
  if (!home_dir.empty())
    for (const std::string& n : names)
      out.push_back(home_dir + n);
  for (const std::string& n : names)
    out.push_back(n);
  if (home_dir != "/usr/local/cuda/lib64/")
    for (const std::string& n : names)
      out.push_back("/usr/local/cuda/lib64/" + n);
  return out;
}

} // namespace tp::rt
