// Loading plug-ins (tilepilot/plugin.h). Everything about the file is checked before any of its
// code that could register runs: it loads, it has the three entry points, its ABI number and
// TilePilot version are ours. Its operators are then registered all or none: a clash with an
// operator already known leaves the registry as it was.
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <mutex>
#include <sys/stat.h>

#include "tilepilot/error.h"
#include "tilepilot/plugin.h"

namespace tp::ops {

namespace {

std::mutex& plugin_mutex() {
  static std::mutex mu;
  return mu;
}

std::vector<std::string>& loaded() {
  static std::vector<std::string> paths;
  return paths;
}

std::string canonical_path(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    user_error() << "plug-in " << path << " does not exist; pass the path of the shared "
                 << "library the plug-in's build made (e.g. build/libmy_ops.so)";
  if (!S_ISREG(st.st_mode))
    user_error() << "plug-in " << path << " is not a regular file; pass the shared library itself";
  std::error_code ec;
  std::filesystem::path p = std::filesystem::canonical(path, ec);
  return ec ? path : p.string();
}

} // namespace

void load_plugin(const std::string& path_in) {
  std::lock_guard<std::mutex> g(plugin_mutex());
  const std::string path = canonical_path(path_in);
  for (const std::string& p : loaded())
    if (p == path) return;
  // RTLD_GLOBAL: a plug-in's own operators may be looked up by another plug-in's code.
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char* e = ::dlerror();
    user_error() << "plug-in " << path_in << " does not load: " << (e ? e : "unknown error")
                 << "; a plug-in must be built against this TilePilot's installed package "
                 << "(TilePilot::plugin) and loaded by a TilePilot program";
  }
  using AbiFn = int (*)();
  using VersionFn = const char* (*)();
  using RegisterFn = void (*)(PluginRegistry&);
  auto abi = reinterpret_cast<AbiFn>(::dlsym(h, "tilepilot_plugin_abi"));
  auto version = reinterpret_cast<VersionFn>(::dlsym(h, "tilepilot_plugin_version"));
  auto reg = reinterpret_cast<RegisterFn>(::dlsym(h, "tilepilot_plugin_register"));
  if (!abi || !version || !reg) {
    ::dlclose(h);
    user_error() << "plug-in " << path_in << " has no TilePilot entry point ("
                 << (!abi       ? "tilepilot_plugin_abi"
                     : !version ? "tilepilot_plugin_version"
                                : "tilepilot_plugin_register")
                 << " is missing); define it with TILEPILOT_PLUGIN(registry) { ... } from "
                 << "<tilepilot/plugin.h>";
  }
  if (abi() != TILEPILOT_PLUGIN_ABI) {
    const int got = abi();
    ::dlclose(h);
    user_error() << "plug-in " << path_in << " was built for plug-in ABI " << got
                 << ", this TilePilot has ABI " << TILEPILOT_PLUGIN_ABI
                 << "; rebuild the plug-in against this TilePilot's installed package";
  }
  if (std::string(version()) != TILEPILOT_VERSION) {
    const std::string got = version();
    ::dlclose(h);
    user_error() << "plug-in " << path_in << " was built against TilePilot " << got
                 << ", this is TilePilot " << TILEPILOT_VERSION
                 << "; rebuild the plug-in against this version's installed package";
  }
  PluginRegistry r;
  try {
    reg(r);
  } catch (const UserError& e) {
    user_error() << "plug-in " << path_in << " failed while registering: " << e.what();
  } catch (const std::exception& e) {
    user_error() << "plug-in " << path_in << " failed while registering: " << e.what();
  }
  if (r.operators().empty())
    user_error() << "plug-in " << path_in << " registers no operator; call registry.add(...) "
                 << "in its TILEPILOT_PLUGIN body";
  // All or none: check every name first (against the registry and each other).
  std::vector<std::string> names;
  for (const auto& op : r.operators()) {
    if (!op) user_error() << "plug-in " << path_in << " registered a null operator";
    const std::string n = op->name();
    for (const std::string& m : names)
      if (m == n)
        user_error() << "plug-in " << path_in << " registers two operators named '" << n
                     << "'; rename one of them";
    for (const Operator* known : all_operators())
      if (known->name() == n)
        user_error() << "plug-in " << path_in << " registers operator '" << n
                     << "', but that name is taken (" << operator_origin(n)
                     << "); rename the plug-in's operator";
    names.push_back(n);
  }
  for (const auto& op : r.operators())
    register_operator(op, path);
  // The library stays loaded for the life of the process: its operators' code lives in it.
  loaded().push_back(path);
}

void load_env_plugins() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("TILEPILOT_PLUGINS");
    if (!env || !*env) return;
    std::string list = env, item;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(':', start);
      if (end == std::string::npos) end = list.size();
      item = list.substr(start, end - start);
      if (!item.empty()) {
        try {
          load_plugin(item);
        } catch (const UserError& e) {
          user_error() << "$TILEPILOT_PLUGINS: " << e.what();
        }
      }
      start = end + 1;
    }
  });
}

std::vector<std::string> loaded_plugins() {
  std::lock_guard<std::mutex> g(plugin_mutex());
  return loaded();
}

} // namespace tp::ops
