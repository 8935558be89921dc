// `tilepilot env` and `tilepilot ops`.
#include <iostream>
#include <nlohmann/json.hpp>

#include "Commands.h"
#include "ops/Catalog.h"
#include "runtime/Environment.h"
#include "tilepilot/runtime.h"

namespace tp::cli {

void add_info_commands(CLI::App& app, int* rc) {
  auto* env = app.add_subcommand("env", "versions of TilePilot, CUDA pieces and GPUs");
  auto json_env = std::make_shared<bool>(false);
  env->add_flag("--json", *json_env, "print JSON");
  env->callback([json_env, rc] {
    nlohmann::json j = rt::to_env_json(rt::capture_environment());
    if (*json_env) {
      std::cout << j.dump(2) << "\n";
    } else {
      for (auto& [k, v] : j.items()) {
        if (k == "gpus") {
          for (auto& g : v)
            std::cout << "gpu " << g["ordinal"] << ": " << g["name"].get<std::string>() << " ("
                      << g["arch"].get<std::string>() << ", " << g["sm_count"] << " SMs)\n";
        } else {
          std::cout << k << ": " << (v.is_string() ? v.get<std::string>() : v.dump()) << "\n";
        }
      }
    }
    *rc = 0;
  });

  auto* ops_cmd = app.add_subcommand("ops", "operators, their shape keys and config spaces");
  auto json_ops = std::make_shared<bool>(false);
  ops_cmd->add_flag("--json", *json_ops, "print JSON");
  ops_cmd->callback([json_ops, rc] {
    nlohmann::json all = ops::catalog_json();
    if (*json_ops) {
      std::cout << all.dump(2) << "\n";
    } else {
      for (auto& j : all) {
        std::cout << j["name"].get<std::string>() << ": " << j["summary"].get<std::string>()
                  << "\n  shape keys:\n";
        for (auto& [k, v] : j["shape_keys"].items())
          std::cout << "    " << k << "  " << v.get<std::string>() << "\n";
        std::cout << "  config space:\n";
        for (auto& [k, v] : j["config_space"].items())
          std::cout << "    " << k << " in " << v["values"].dump() << "  "
                    << v["help"].get<std::string>() << "\n";
      }
    }
    *rc = 0;
  });
}

} // namespace tp::cli
