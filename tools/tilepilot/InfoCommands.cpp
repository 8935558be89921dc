// `tilepilot env` and `tilepilot ops`.
#include <iostream>
#include <nlohmann/json.hpp>

#include "Commands.h"
#include "ops/Operator.h"
#include "tilepilot/runtime.h"

namespace tp::cli {

namespace {

nlohmann::json env_json(const rt::EnvironmentInfo& e) {
  nlohmann::json j;
  j["tilepilot"] = e.tilepilot_version;
  j["git_commit"] = e.git_commit;
  j["compiler"] = e.host_compiler;
  j["os"] = e.os;
  j["cuda_toolkit"] = e.cuda_toolkit;
  j["nvrtc"] = e.nvrtc;
  j["driver"] = e.driver;
  j["gpus"] = nlohmann::json::array();
  for (const auto& g : e.gpus)
    j["gpus"].push_back({{"ordinal", g.ordinal},
                         {"name", g.name},
                         {"arch", g.arch},
                         {"sm_count", g.sm_count},
                         {"memory_bytes", g.total_memory_bytes},
                         {"l2_bytes", g.l2_bytes}});
  if (!e.gpu_note.empty()) j["gpu_note"] = e.gpu_note;
  j["cublaslt"] = e.cublaslt;
  j["cudnn"] = e.cudnn;
  return j;
}

} // namespace

void add_info_commands(CLI::App& app, int* rc) {
  auto* env = app.add_subcommand("env", "versions of TilePilot, CUDA pieces and GPUs");
  auto json_env = std::make_shared<bool>(false);
  env->add_flag("--json", *json_env, "print JSON");
  env->callback([json_env, rc] {
    nlohmann::json j = env_json(rt::capture_environment());
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
    nlohmann::json all = nlohmann::json::array();
    for (const ops::Operator* op : ops::all_operators()) {
      nlohmann::json j;
      j["name"] = op->name();
      j["summary"] = op->summary();
      for (const auto& [k, help] : op->shape_keys()) j["shape_keys"][k] = help;
      for (const ops::Knob& kn : op->knobs())
        j["config_space"][kn.name] = {{"values", kn.values}, {"help", kn.help}};
      ops::Problem dummy;
      all.push_back(j);
    }
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
