// `tilepilot pilot SPEC.yaml [--out DIR]` and `tilepilot repro DIR [--backend cpu|cuda]`.
// pilot: exit 0 when every stage that ran passed (whatever the decision), 1 when one failed
// (e.g. correctness, with a reproducer written), 2 for a bad spec. repro: 1 when the case still
// fails, 0 when it now passes, 2 for a bad folder.
#include <cmath>
#include <filesystem>
#include <iostream>

#include "Commands.h"
#include "pilot/Pilot.h"
#include "pilot/Repro.h"

namespace tp::cli {

namespace {

/// This binary, so that repro/command.txt replays with exactly the build that failed.
std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("tilepilot") : p.string();
}

void add_pilot(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("pilot", "run the operator pilot of a spec (DESIGN.md)");
  struct Args {
    std::string spec, out;
    double flop_budget = 3e8;
    int shrink_attempts = 40;
    bool progress = false, no_progress = false, force = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("spec", a->spec, "pilot spec (examples in examples/pilots/)")->required();
  cmd->add_option("--out", a->out, "output folder (default: pilot-out/<spec name>)");
  cmd->add_option("--flop-budget", a->flop_budget,
                  "CPU interpreter work per case before blocks are sampled");
  cmd->add_option("--shrink-attempts", a->shrink_attempts,
                  "checks the shrinker may run on a failing case");
  cmd->add_flag("--progress", a->progress, "draw progress on stderr even when not a terminal");
  cmd->add_flag("--no-progress", a->no_progress, "never draw progress");
  cmd->add_flag("--force", a->force,
                "replace --out even when it holds folders that are not a pilot's output (its other "
                "regular files are kept either way)");
  cmd->callback([a, cmd, rc] {
    if (cmd->count("--out") && a->out.empty())
      user_error() << "--out is empty; pass a folder for the pilot's output, e.g. --out "
                   << pilot::default_out_dir(a->spec);
    pilot::PilotSpec spec;
    try {
      spec = pilot::load_spec(a->spec);
    } catch (const UserError& e) {
      // Spec diagnostics are already "FILE:LINE:COL: error: ...": print them as they are.
      std::cerr << e.what() << "\n";
      *rc = 2;
      return;
    }
    for (const auto& w : spec.warnings)
      std::cerr << a->spec << ": warning: " << w << "\n";
    pilot::PilotOptions o;
    o.out_dir = a->out.empty() ? pilot::default_out_dir(a->spec) : a->out;
    if (!(a->flop_budget > 0) || !std::isfinite(a->flop_budget))
      user_error() << "--flop-budget " << a->flop_budget
                   << " must be a positive finite number; the default is 3e8";
    if (a->shrink_attempts < 0)
      user_error() << "--shrink-attempts " << a->shrink_attempts << " must not be negative";
    o.force = a->force;
    o.cpu_flop_budget = a->flop_budget;
    o.shrink_attempts = a->shrink_attempts;
    o.tilepilot_exe = self_exe();
    o.progress = a->no_progress ? pilot::ProgressMode::off
                 : a->progress  ? pilot::ProgressMode::on
                                : pilot::ProgressMode::automatic;
    pilot::PilotResult r = pilot::run_pilot(spec, o);
    for (const auto& s : r.stages)
      std::cout << "  " << s.name << std::string(13 - std::min<size_t>(12, s.name.size()), ' ')
                << s.status << "\n";
    std::cout << "decision: " << r.decision << "\n";
    for (const auto& reason : r.report["decision"].value("reasons", nlohmann::json::array()))
      std::cout << "  - " << reason.get<std::string>() << "\n";
    std::cout << "report: " << o.out_dir << "/report.md (also report.json, report.html)\n";
    if (const auto* c = r.stage("correctness"); c && c->data.contains("repro"))
      std::cout << "reproducer: " << c->data["repro"]["dir"].get<std::string>()
                << "\n  replay: " << c->data["repro"]["command"].get<std::string>() << "\n";
    *rc = r.exit_code;
  });
}

void add_repro(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("repro", "replay a reproducer folder written by a pilot");
  struct Args {
    std::string dir, backend;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("dir", a->dir, "the repro/ folder")->required();
  cmd->add_option("--backend", a->backend, "cpu | cuda (default: as recorded)");
  cmd->callback([a, rc] {
    if (!a->backend.empty() && a->backend != "cpu" && a->backend != "cuda")
      user_error() << "unknown --backend '" << a->backend << "'; use cpu or cuda";
    *rc = pilot::replay_repro(a->dir, pilot::default_backends(), std::cout, a->backend);
  });
}

} // namespace

void add_pilot_commands(CLI::App& app, int* rc) {
  add_pilot(app, rc);
  add_repro(app, rc);
}

} // namespace tp::cli
