// Reproducers: one correctness case, fully pinned (operator, problem, dtype, config, seed,
// backend, tolerance, interpreter budget, test-only fault), written as a folder that
// `tilepilot repro DIR` replays:
//   repro.json        the case and the failing CheckResult
//   kernel.ir.txt     the printed IR of the kernel that failed
//   kernel.cu.txt     generated CUDA       } or "not produced: <reason>" when this build or
//   nvrtc.log         NVRTC's log          } machine has no CUDA backend
//   resources.json    registers, shared memory, spills }
//   command.txt       the command that replays it
#pragma once
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "pilot/Backends.h"

namespace tp::pilot {

struct ReproCase {
  ops::Problem problem;
  std::string fault; // test-only fault injected into the kernel, "" for none
  std::string backend = "cpu", arch = "sm_90a";
  ops::Config config;
  uint64_t seed = 0;
  double atol = 0, rtol = 0;
  double flop_budget = 3e8; // interpreter: the same budget samples the same blocks
};

/// Runs the case's check (user error when its backend is not available here).
ops::CheckResult run_case(const ReproCase& c, const Backends& b);

nlohmann::json to_json(const ReproCase& c);
/// Parses repro.json's "case"; user error naming the field that is wrong.
ReproCase repro_case_from_json(const nlohmann::json& j, const std::string& file);

/// Writes the reproducer folder `dir` for a failing case. `shrink` records how the case was
/// reduced; `exe` is the tilepilot command written into command.txt, which names `final_dir`
/// (where the folder will be; default `dir`).
void write_repro(const std::string& dir, const ReproCase& c, const ops::CheckResult& failing,
                 const Backends& b, const nlohmann::json& shrink, const std::string& exe,
                 const std::string& final_dir = "");

/// A reproducer folder's repro.json as replay reads it: the case, the recorded failure and its
/// one-line description. User error naming the file and what is wrong with it.
struct ReproFile {
  ReproCase c;
  nlohmann::json failure;
  std::string recorded; // the failure described, as replay prints it
};
ReproFile read_repro(const std::string& dir);

/// Replays `dir`: prints the result next to the recorded one. Returns 1 when the case still
/// fails, 0 when it now passes. `backend` overrides the recorded backend when not empty.
int replay_repro(const std::string& dir, const Backends& b, std::ostream& out,
                 const std::string& backend = "");

} // namespace tp::pilot
