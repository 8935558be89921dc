// Stream, EventTimer and launch().
#include "runtime/Launch.h"

#include <map>
#include <mutex>

#include "runtime/DeviceFaults.h"
#include "runtime/Driver.h"
#include "runtime/ThreadDevice.h"
#include "tilepilot/error.h"

namespace tp::rt {

Stream::Stream() {
  ensure_context();
  TILEPILOT_CU(driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
}

Stream::~Stream() {
  if (stream_) driver().cuStreamDestroy(stream_);
}

void Stream::synchronize() const {
  TILEPILOT_CU(driver().cuStreamSynchronize(stream_));
}

EventTimer::EventTimer() {
  ensure_context();
  TILEPILOT_CU(driver().cuEventCreate(&start_, CU_EVENT_DEFAULT));
  TILEPILOT_CU(driver().cuEventCreate(&stop_, CU_EVENT_DEFAULT));
}

EventTimer::~EventTimer() {
  if (start_) driver().cuEventDestroy(start_);
  if (stop_) driver().cuEventDestroy(stop_);
}

void EventTimer::start(CUstream stream) {
  TILEPILOT_CU(driver().cuEventRecord(start_, stream));
}

void EventTimer::stop(CUstream stream) {
  TILEPILOT_CU(driver().cuEventRecord(stop_, stream));
}

float EventTimer::elapsed_ms() const {
  TILEPILOT_CU(driver().cuEventSynchronize(stop_));
  float ms = 0;
  TILEPILOT_CU(driver().cuEventElapsedTime(&ms, start_, stop_));
  return ms;
}

namespace {

// The dynamic shared-memory opt-in each function was given. Setting it is a property of the
// function (it persists across launches), so it is checked and set once per function and size
// instead of costing three driver calls on every launch of a hot kernel.
std::mutex shared_limit_mutex;
std::map<CUfunction, unsigned>& shared_limits() {
  static std::map<CUfunction, unsigned> m;
  return m;
}

bool shared_limit_set(CUfunction fn, unsigned bytes) {
  std::lock_guard<std::mutex> l(shared_limit_mutex);
  auto it = shared_limits().find(fn);
  return it != shared_limits().end() && it->second >= bytes;
}

void remember_shared_limit(CUfunction fn, unsigned bytes) {
  std::lock_guard<std::mutex> l(shared_limit_mutex);
  shared_limits()[fn] = bytes;
}

// A launch through here knows only the CUfunction; CudaKernel notes its kernel's name after.
const std::string kUnnamed;

/// Raises `fn`'s dynamic shared memory limit to what `c` asks when that is over the 48 KiB
/// default, once per function and size; a request over the device's opt-in limit is a
/// UserError naming both numbers.
void ensure_shared_limit(CUfunction fn, const LaunchConfig& c) {
  constexpr unsigned default_shared_limit = 48 * 1024;
  if (c.shared_bytes <= default_shared_limit || shared_limit_set(fn, c.shared_bytes)) return;
  CUdevice dev = ensure_context();
  Driver& d = driver();
  int optin = 0, static_bytes = 0;
  TILEPILOT_CU(
      d.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
  TILEPILOT_CU(d.cuFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn));
  if (c.shared_bytes + unsigned(static_bytes) > unsigned(optin))
    user_error() << "kernel needs " << c.shared_bytes << " bytes of dynamic + " << static_bytes
                 << " bytes of static shared memory per block, but device "
                 << thread_device_ordinal() << " allows at most " << optin;
  TILEPILOT_CU(d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    int(c.shared_bytes)));
  remember_shared_limit(fn, c.shared_bytes);
}

/// The CUlaunchConfig of `c`, pointing at `attr` for its cluster dimensions.
CUlaunchConfig cluster_config(const LaunchConfig& c, CUlaunchAttribute& attr) {
  attr = CUlaunchAttribute{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = c.cluster[0];
  attr.value.clusterDim.y = c.cluster[1];
  attr.value.clusterDim.z = c.cluster[2];
  CUlaunchConfig cfg{};
  cfg.gridDimX = c.grid[0];
  cfg.gridDimY = c.grid[1];
  cfg.gridDimZ = c.grid[2];
  cfg.blockDimX = c.block[0];
  cfg.blockDimY = c.block[1];
  cfg.blockDimZ = c.block[2];
  cfg.sharedMemBytes = c.shared_bytes;
  cfg.hStream = c.stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cfg;
}

} // namespace

int max_active_clusters(CUfunction fn, const LaunchConfig& c) {
  Driver& d = driver();
  if (!d.cuOccupancyMaxActiveClusters) return 0;
  ensure_shared_limit(fn, c);
  CUlaunchAttribute attr;
  CUlaunchConfig cfg = cluster_config(c, attr);
  int n = 0;
  TILEPILOT_CU(d.cuOccupancyMaxActiveClusters(&n, fn, &cfg));
  return n;
}

void launch(CUfunction fn, const LaunchConfig& c, void** args) {
  // Callers may launch from a thread whose context is not yet current (framework kernels).
  ensure_context();
  Driver& d = driver();
  ensure_shared_limit(fn, c);
  bool clustered = c.cluster[0] * c.cluster[1] * c.cluster[2] > 1;
  if (!clustered) {
    TILEPILOT_CU(d.cuLaunchKernel(fn, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1],
                                  c.block[2], c.shared_bytes, c.stream, args, nullptr));
    note_launch(kUnnamed, c);
    return;
  }
  if (!d.cuLaunchKernelEx)
    user_error() << "a thread block cluster launch needs cuLaunchKernelEx, which this CUDA driver "
                    "lacks (driver "
                 << d.version << ")";
  CUlaunchAttribute attr;
  CUlaunchConfig cfg = cluster_config(c, attr);
  TILEPILOT_CU(d.cuLaunchKernelEx(&cfg, fn, args, nullptr));
  note_launch(kUnnamed, c);
}

} // namespace tp::rt
