// bench_host_path: what one dispatched device call costs on the host, with no GPU needed. The
// process runs on the fake CUDA driver (tests/faults/fake_cuda: device memory is host memory, a
// launch does nothing), so the time of Dispatcher::run(op, DeviceView...) - the C++ call the
// Python op makes - is host work only: problem from shapes, routing, bucket lookup, argument
// checks, tensor maps, the launch call. Each operator is pinned at a small shape with its sm_90a
// default config (compiled once by NVRTC, then cached), warmed up, and timed over --calls calls.
// The stages are timed again one by one through the same functions the dispatcher calls, so the
// breakdown adds up to about the total.
//   bench_host_path [--calls 20000] [--reps 5] [--real-driver] [--wall]
// Without --real-driver it starts itself again on the fake driver when it is not on it already.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <dlfcn.h>
#include <fmt/format.h>
#include <functional>
#include <time.h>
#include <unistd.h>

#include "compile/CudaKernel.h"
#include "dispatch/DispatcherImpl.h"
#include "ir/ArgBinding.h"
#include "ops/CudaProgram.h"
#include "ops/Operator.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/DeviceFaults.h"
#include "runtime/Driver.h"
#include "tilepilot/dispatch.h"
#include "tilepilot/error.h"

using namespace tp;

namespace {

bool on_fake_driver() {
  if (!rt::driver_available()) return false;
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return h && dlsym(h, "tilepilot_fake_cu_fail");
}

/// This thread's CPU time in microseconds: steadier than wall time on a shared host, and the
/// host path is all CPU work on the fake driver (nothing waits).
double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return 1e6 * double(t.tv_sec) + 1e-3 * double(t.tv_nsec);
}

/// Microseconds per call of `fn`: the median over `reps` of the mean over `calls` calls, in
/// thread CPU time (--wall: steady-clock time).
bool g_wall = false;
double us_per_call(int calls, int reps, const std::function<void()>& fn) {
  auto now = [] {
    return g_wall ? std::chrono::duration<double, std::micro>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count()
                  : thread_cpu_us();
  };
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
    for (int i = 0; i < calls; ++i)
      fn();
    v.push_back((now() - t0) / calls);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  std::string op;
  std::map<std::string, std::string> shape; // Operator::parse keys
  std::vector<std::vector<int64_t>> tensors;
  std::map<std::string, std::string> options;
};

std::vector<Case> cases() {
  return {
      {"gemm", {{"M", "64"}, {"N", "64"}, {"K", "64"}}, {{64, 64}, {64, 64}, {64, 64}}, {}},
      {"attention",
       {{"B", "1"}, {"H", "2"}, {"Hkv", "2"}, {"S", "128"}, {"Skv", "128"}, {"D", "64"}},
       {{1, 2, 128, 64}, {1, 2, 128, 64}, {1, 2, 128, 64}, {1, 2, 128, 64}},
       {{"causal", "0"}}},
      {"rmsnorm", {{"T", "16"}, {"H", "256"}}, {{16, 256}, {256}, {16, 256}}, {}},
  };
}

void bench(const Case& c, int calls, int reps) {
  const ops::Operator& op = ops::find_operator(c.op);
  const ops::Problem p = op.parse(c.shape, DType::bf16);
  ops::DispatchOptions o;
  o.log = [](const std::string& line) { fmt::print(stderr, "dispatch: {}\n", line); };
  ops::Dispatcher d(o);
  d.pin(c.op, ops::current_device(), {{p, ops::default_config(p, "sm_90a")}});
  std::vector<rt::DeviceBuffer> bufs;
  std::vector<ops::DeviceView> views;
  for (const auto& s : c.tensors) {
    int64_t n = 1;
    for (int64_t e : s)
      n *= e;
    bufs.emplace_back(size_t(n) * 2);
    views.push_back({bufs.back().ptr(), DType::bf16, s});
  }
  d.run(c.op, views, c.options); // compiles (NVRTC, or the kernel cache) and launches once
  if (d.counters(c.op).pinned != 1)
    user_error() << "bench_host_path: " << c.op
                 << " did not run its pinned kernel: " << d.summary();

  // The same calls with the dispatcher's host-path caches off, then on (the shipped state).
  ops::Dispatcher::Impl& im = ops::DispatcherAccess::impl(d);
  // These operators' programs are one kernel; its step is what the stages below time.
  std::shared_ptr<ops::CudaProgram> prog = im.device_kernels.begin()->second;
  cuda::CudaKernel* ck = &prog->step(0);
  im.host_caches = false;
  ck->reuse_bindings(false);
  const double uncached = us_per_call(calls, reps, [&] { d.run(c.op, views, c.options); });
  im.host_caches = true;
  ck->reuse_bindings(true);
  const double total = us_per_call(calls, reps, [&] { d.run(c.op, views, c.options); });

  // The stages without the caches, each through the function the dispatcher calls.
  std::vector<std::vector<int64_t>> shapes;
  std::vector<DType> dtypes;
  std::vector<cuda::DeviceTensor> tensors;
  for (const auto& v : views)
    tensors.emplace_back(v.ptr, v.dtype, v.shape);
  const double problem = us_per_call(calls, reps, [&] {
    shapes.clear();
    dtypes.clear();
    for (const auto& v : views) {
      shapes.push_back(v.shape);
      dtypes.push_back(v.dtype);
    }
    (void)ops::find_operator(c.op).problem_for(shapes, dtypes, c.options);
  });
  const double route = us_per_call(calls, reps, [&] { (void)im.route(p, true); });
  dispatch::Route r = im.route(p, true);
  const double bucket = us_per_call(calls, reps, [&] {
    const std::string key = "device|" + dispatch::bucket_key(p, r.entry->config);
    rt::LaunchContext context("dispatched " + key);
  });
  const ir::KernelNode& k = ck->kernel().node();
  const double checks = us_per_call(calls, reps, [&] {
    std::vector<ir::ArgDesc> desc;
    for (const auto& t : tensors)
      desc.push_back({t.dtype, t.shape, t.strides});
    (void)ir::bind_args(k, desc);
  });
  ck->reuse_bindings(false);
  const double launch = us_per_call(calls, reps, [&] { ck->launch(tensors); });
  ck->reuse_bindings(true);
  const std::string tma = ck->lowered(true).tmas.empty() ? "" : " (TMA)";
  fmt::print(
      "{:<10} {:>8.2f} {:>8.2f} {:>6.2f}x | {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f}{}\n", c.op,
      uncached, total, uncached / total, problem, route, bucket, checks, launch, tma);
}

} // namespace

int main(int argc, char** argv) try {
  CLI::App app{"host time of one dispatched device call, on the fake CUDA driver"};
  int calls = 20000, reps = 5;
  bool real = false;
  app.add_option("--calls", calls, "calls per timed repetition")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "repetitions; the median is reported")->check(CLI::PositiveNumber);
  app.add_flag("--real-driver", real, "time on the installed driver (a GPU) instead of the fake");
  app.add_flag("--wall", g_wall, "report wall time instead of this thread's CPU time");
  CLI11_PARSE(app, argc, argv);
#ifdef TILEPILOT_FAKE_CUDA_DIR
  if (!real && !on_fake_driver()) {
    if (std::getenv("TILEPILOT_HOST_BENCH_CHILD"))
      user_error() << "bench_host_path: the fake driver in " << TILEPILOT_FAKE_CUDA_DIR
                   << " did not load; build the fake_cuda target";
    setenv("LD_LIBRARY_PATH", TILEPILOT_FAKE_CUDA_DIR, 1);
    setenv("TILEPILOT_HOST_BENCH_CHILD", "1", 1);
    execv("/proc/self/exe", argv);
    user_error() << "bench_host_path: cannot start itself again on the fake driver";
  }
#else
  if (!real)
    user_error() << "bench_host_path: built without the fake driver (configure with "
                    "TILEPILOT_TESTS=ON); pass --real-driver to time on a GPU";
#endif
  fmt::print("host microseconds per dispatched call ({} driver, {} time, {} calls x {} reps, "
             "median)\n",
             on_fake_driver() ? "fake" : "installed", g_wall ? "wall" : "thread CPU", calls, reps);
  fmt::print("{:<10} {:>8} {:>8} {:>7} | {:>8} {:>8} {:>8} {:>8} {:>8}\n", "operator", "no-cache",
             "total", "ratio", "problem", "route", "key+ctx", "bind", "launch");
  for (const Case& c : cases())
    bench(c, calls, reps);
  fmt::print("no-cache / total: Dispatcher::run with the host-path caches (problem, bucket text, "
             "launch bindings) off / on; "
             "ratio = no-cache / total\n");
  fmt::print("stages: problem = shapes -> Problem (problem_for); route = release lookup; key+ctx "
             "= bucket key and LaunchContext text; bind = argument binding alone (part of "
             "launch); launch = CudaKernel::launch (checks, tensor maps, driver call)\n");
  return 0;
} catch (const UserError& e) {
  fmt::print(stderr, "{}\n", e.what());
  return 2;
}
