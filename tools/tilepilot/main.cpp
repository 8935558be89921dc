// tilepilot: the command-line interface (DESIGN.md, "The CLI"). Exit status: 0 success,
// 1 a check failed, 2 bad input (with a message saying what to write instead), 3 internal error.
#include <iostream>

#include "Commands.h"
#include "autotune/CudaHooks.h"
#include "runtime/BuildInfo.h"
#include "tilepilot/error.h"

int main(int argc, char** argv) {
  CLI::App app{"TilePilot: tile-language GPU kernels and the operator pilot"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string(TILEPILOT_VERSION) + " (" + tp::rt::build_git_commit() + ")");
  int rc = 0;
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const tp::UserError& e) {
    std::cerr << "tilepilot: " << e.what() << "\n";
    return 2;
  } catch (const tp::InternalError& e) {
    std::cerr << "tilepilot: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "tilepilot: error: " << e.what() << "\n";
    return 3;
  }
  return rc;
}
