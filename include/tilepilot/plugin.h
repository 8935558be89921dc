// Plug-ins: a user's operators in their own shared library, registered at run time so that
// every command (ops, show, check, bench, tune, pilot, repro) and dispatch work for them.
//
// A plug-in is built against the installed package's TilePilot::plugin target (headers only:
// the library's code comes from the program that loads it) and defines its entry point with
// TILEPILOT_PLUGIN:
//
//   #include <tilepilot/plugin.h>
//   TILEPILOT_PLUGIN(registry) { registry.add(std::make_shared<MyOp>()); }
//
// The loader checks the plug-in's ABI number and TilePilot version before running anything of
// it; a mismatch, a missing entry point or an operator name already taken is a user error that
// names the file, and leaves the registry as it was.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tilepilot/operator.h"

/// Bumped whenever a change to the public headers breaks plug-ins built before it.
// 2: Knob::multiple, 3: Operator::program, 4: KernelOptions::blocks_per_sm
#define TILEPILOT_PLUGIN_ABI 4

namespace tp::ops {

/// What a plug-in's entry point adds its operators to.
class PluginRegistry {
public:
  void add(std::shared_ptr<const Operator> op) { ops_.push_back(std::move(op)); }
  const std::vector<std::shared_ptr<const Operator>>& operators() const { return ops_; }

private:
  std::vector<std::shared_ptr<const Operator>> ops_;
};

/// Loads the plug-in at `path` and registers its operators. Loading the same file twice is a
/// no-op. User error naming the file on any failure.
void load_plugin(const std::string& path);
/// Loads every plug-in named in $TILEPILOT_PLUGINS (paths separated by ':'), once.
void load_env_plugins();
/// The plug-ins loaded so far, in load order.
std::vector<std::string> loaded_plugins();

} // namespace tp::ops

#define TILEPILOT_PLUGIN(registry)                                                                 \
  extern "C" __attribute__((visibility("default"))) int tilepilot_plugin_abi() {                   \
    return TILEPILOT_PLUGIN_ABI;                                                                   \
  }                                                                                                \
  extern "C" __attribute__((visibility("default"))) const char* tilepilot_plugin_version() {       \
    return TILEPILOT_VERSION;                                                                      \
  }                                                                                                \
  static void tilepilot_plugin_body(::tp::ops::PluginRegistry& registry);                          \
  extern "C" __attribute__((visibility("default"))) void tilepilot_plugin_register(                \
      ::tp::ops::PluginRegistry& r) {                                                              \
    tilepilot_plugin_body(r);                                                                      \
  }                                                                                                \
  static void tilepilot_plugin_body(::tp::ops::PluginRegistry& registry)
