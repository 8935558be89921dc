// One thread per measuring device: work given to a device runs on its thread, one item after
// another, while other devices' threads run theirs at the same time. With one device no thread
// is started and work runs on the caller's thread, as the tuner did before it measured on
// several devices.
#pragma once
#include <functional>
#include <future>
#include <memory>
#include <vector>

namespace tp::autotune {

class DeviceWorkers {
public:
  explicit DeviceWorkers(int devices);
  /// Runs the work still queued, then joins the threads.
  ~DeviceWorkers();
  DeviceWorkers(const DeviceWorkers&) = delete;
  DeviceWorkers& operator=(const DeviceWorkers&) = delete;

  int size() const { return devices_; }
  /// Queues `work` on device `device`'s thread (runs it now, on this thread, with one device).
  /// The future is ready once it has run and carries any exception it threw.
  std::future<void> run(int device, std::function<void()> work);

  struct Worker; // a thread and its queue; defined in DeviceWorkers.cpp

private:
  int devices_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

} // namespace tp::autotune
