/* LD_PRELOAD helper for diag_cuda_path.py: on SIGSEGV, SIGBUS or SIGABRT, prints the native
 * stack as "TRACE <object>+0x<offset> <symbol>" lines on stderr (offsets relative to each
 * object's load address, so addr2line can resolve them), then lets the signal take its usual
 * course. Python's faulthandler, installed later, runs first and re-raises into this handler.
 * Build: cc -shared -fPIC -O1 -o segv_trace.so segv_trace.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_fatal(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  char line[1024];
  for (int i = 0; i < n; ++i) {
    Dl_info info;
    memset(&info, 0, sizeof info);
    int len;
    if (dladdr(frames[i], &info) && info.dli_fname)
      len = snprintf(line, sizeof line, "TRACE %s+0x%lx %s\n", info.dli_fname,
                     (unsigned long)((char*)frames[i] - (char*)info.dli_fbase),
                     info.dli_sname ? info.dli_sname : "?");
    else
      len = snprintf(line, sizeof line, "TRACE ?+%p ?\n", frames[i]);
    if (len > 0) write(2, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  void* warm[1];
  backtrace(warm, 1); /* loads libgcc_s now: not inside the handler */
  signal(SIGSEGV, on_fatal);
  signal(SIGBUS, on_fatal);
  signal(SIGABRT, on_fatal);
}
