// Helpers of the kill -9 tests: run a body in a forked child, and let it finish or SIGKILL it
// after a given time.
#pragma once
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace tp::testing {

/// Forks; the child runs `body` with stdout and stderr sent to /dev/null and exits 0 (3 when
/// `body` throws). Returns the pid.
template <typename F>
pid_t spawn(F body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    try {
      body();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  return pid;
}

/// Runs the child to completion, or SIGKILLs it after `kill_after`; true when it was killed.
/// `*rc` is the exit status of a child that finished.
inline bool run_or_kill(pid_t pid, std::chrono::microseconds kill_after, int* rc) {
  auto deadline = std::chrono::steady_clock::now() + kill_after;
  int status = 0;
  *rc = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) *rc = WEXITSTATUS(status);
  return WIFSIGNALED(status);
}

} // namespace tp::testing
