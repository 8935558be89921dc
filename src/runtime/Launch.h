// Streams, event timing and kernel launch on the driver API.
#pragma once
#include <array>
#include <cuda.h>

namespace tp::rt {

/// A non-blocking stream (does not synchronize with the legacy default stream).
class Stream {
public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return stream_; }
  void synchronize() const;

private:
  CUstream stream_ = nullptr;
};

/// Device time between start() and stop(), measured with a pair of events on one stream.
class EventTimer {
public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(CUstream stream = nullptr);
  void stop(CUstream stream = nullptr);
  /// Waits for the stop event, then returns milliseconds between the two.
  float elapsed_ms() const;

private:
  CUevent start_ = nullptr, stop_ = nullptr;
};

struct LaunchConfig {
  std::array<unsigned, 3> grid{1, 1, 1}, block{1, 1, 1};
  std::array<unsigned, 3> cluster{1, 1, 1}; // thread block cluster (sm_90+); 1x1x1 = none
  unsigned shared_bytes = 0;                // dynamic shared memory per block
  CUstream stream = nullptr;
};

/// How many clusters of `config`'s shape can run at once (cuOccupancyMaxActiveClusters: a
/// cluster's blocks must fit in one GPC, so this can be less than the SMs' count divided by the
/// cluster's size); 0 when the driver predates the query.
int max_active_clusters(CUfunction fn, const LaunchConfig& config);

/// Launches `fn` with `args` (one pointer per kernel parameter). Raises the function's dynamic
/// shared memory limit when `shared_bytes` exceeds the 48 KiB default, and reports a request over
/// the device's opt-in limit as a UserError naming both numbers.
void launch(CUfunction fn, const LaunchConfig& config, void** args);

} // namespace tp::rt
