// tilepilot: the command-line interface (DESIGN.md, "The CLI"). Exit status: 0 success,
// 1 a check failed, 2 bad input (with a message saying what to write instead; out of device
// memory counts, like out of host memory: the problem is too large for this machine),
// 3 internal error, 4 the GPU faulted (a kernel trapped, accessed memory out of bounds or hit a
// time limit): neither bad input nor, necessarily, a TilePilot bug, and the context is lost.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "Commands.h"
#include "autotune/CudaHooks.h"
#include "pilot/SpecReader.h"
#include "runtime/BuildInfo.h"
#include "tilepilot/device_error.h"
#include "tilepilot/error.h"
#include "tilepilot/plugin.h"

int main(int argc, char** argv) {
  CLI::App app{"TilePilot: tile-language GPU kernels and the operator pilot"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string(TILEPILOT_VERSION) + " (" + tp::rt::build_git_commit() + ")");
  int rc = 0;
  // Plug-ins register operators before any command runs, so they are loaded from argv below
  // (before parsing); the option is declared here so that it is accepted and documented.
  std::vector<std::string> plugin_paths;
  app.add_option("--plugin", plugin_paths,
                 "shared library of a user's operators (repeatable; also $TILEPILOT_PLUGINS, "
                 "paths separated by ':')")
      ->type_name("PATH.so");
  // `tilepilot tune` and adaptive config choice find the CUDA backend's tuning hooks through
  // the registry; registered here, explicitly, because a static initialiser in the core library
  // would be dropped by the linker.
  tp::autotune::register_cuda_tune_hooks();
  tp::cli::add_info_commands(app, &rc);
  tp::cli::add_show_command(app, &rc);
  tp::cli::add_check_command(app, &rc);
  tp::cli::add_bench_command(app, &rc);
  tp::cli::add_tune_command(app, &rc);
  tp::cli::add_pilot_commands(app, &rc);
  tp::cli::add_model_command(app, &rc);
  // An unknown command gets a list and a suggestion, not CLI11's "arguments were not expected".
  int first = 1; // the command's position, after any --plugin PATH
  while (first < argc && (std::string(argv[first]) == "--plugin" ||
                          std::string(argv[first]).rfind("--plugin=", 0) == 0))
    first += std::string(argv[first]) == "--plugin" ? 2 : 1;
  if (first < argc && argv[first][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* sc : app.get_subcommands([](const CLI::App*) { return true; }))
      names.push_back(sc->get_name());
    if (std::find(names.begin(), names.end(), argv[first]) == names.end()) {
      std::string near = tp::pilot::closest_key(argv[first], names), list;
      for (const auto& n : names)
        list += (list.empty() ? "" : ", ") + n;
      std::cerr << "tilepilot: error: unknown command '" << argv[first] << "'; "
                << (near.empty() ? "" : "did you mean '" + near + "'? ") << "commands: " << list
                << " (see tilepilot --help)\n";
      return 2;
    }
  }
  // Every exception ends here as one line naming the command: bad input (a file that cannot
  // be read or written, malformed JSON or YAML, a problem too large for this machine) exits 2
  // with what to do; only TilePilot's own bugs exit 3.
  auto command = [&app] {
    std::string name;
    for (const CLI::App* sc : app.get_subcommands())
      name = sc->get_name();
    return "tilepilot" + (name.empty() ? std::string() : " " + name);
  };
  try {
    tp::ops::load_env_plugins();
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--plugin") {
        if (i + 1 >= argc)
          tp::user_error() << "--plugin needs the path of a plug-in's shared library";
        tp::ops::load_plugin(argv[++i]);
      } else if (arg.rfind("--plugin=", 0) == 0) {
        tp::ops::load_plugin(arg.substr(9));
      }
    }
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const tp::UserError& e) {
    std::cerr << "tilepilot: " << e.what() << "\n";
    return 2;
  } catch (const tp::DeviceFault& e) {
    // Nothing was stored after the fault (the tuner, the pilot and the caches write only
    // results taken before it), so exiting is the clean end; a new process gets a new context.
    std::cerr << command() << ": " << e.what() << "\n";
    return 4;
  } catch (const tp::InternalError& e) {
    std::cerr << "tilepilot: " << e.what() << "\n";
    return 3;
  } catch (const std::bad_alloc&) {
    std::cerr << command() << ": error: out of host memory; the problem needs more memory than "
              << "this machine has, so use smaller shapes (or a machine with more memory)\n";
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    std::cerr << command() << ": error: cannot access '" << e.path1().string() << "'"
              << (e.path2().empty() ? "" : " (and '" + e.path2().string() + "')") << ": "
              << e.code().message() << "; check that the path exists, is of the right kind "
              << "(file or folder) and is writable\n";
    return 2;
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what(); // "[json.exception.type_error.302] type must be ..."
    if (auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    std::cerr << command() << ": error: a JSON input is malformed (" << what
              << "); check the JSON files the command reads\n";
    return 2;
  } catch (const YAML::Exception& e) {
    std::cerr << command() << ": error: a YAML input is malformed (" << e.msg << ", line "
              << e.mark.line + 1 << "); check the YAML files the command reads\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << command() << ": internal error (a TilePilot bug, please report it): " << e.what()
              << "\n";
    return 3;
  } catch (...) {
    std::cerr << command() << ": internal error (a TilePilot bug, please report it): an "
              << "unknown exception\n";
    return 3;
  }
  return rc;
}
