// Runs the built `tilepilot` binary from a test (TILEPILOT_CLI, set by tests/CMakeLists.txt),
// capturing its exit status and its stdout and stderr together.
#pragma once
#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace tp::testing {

struct CliResult {
  int rc = -1;
  std::string out; // stdout and stderr together
};

/// `args` already shell-quoted where needed; `env`, if any, is prefixed as "NAME=value ...".
inline CliResult run_cli(const std::string& args, const std::string& env = "") {
  CliResult r;
  std::string cmd = (env.empty() ? "" : env + " ") + TILEPILOT_CLI + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

} // namespace tp::testing
