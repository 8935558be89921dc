// The per-device worker threads of the tuner: a queue and a condition variable each.
#include "autotune/DeviceWorkers.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace tp::autotune {

struct DeviceWorkers::Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::packaged_task<void()>> queue;
  bool stopping = false;
  std::thread thread;

  void loop() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return; // stopping, and nothing left to run
        task = std::move(queue.front());
        queue.pop_front();
      }
      task(); // a packaged_task stores what the work threw in its future
    }
  }
};

DeviceWorkers::DeviceWorkers(int devices) : devices_(devices) {
  if (devices < 1) throw std::logic_error("DeviceWorkers: devices must be >= 1");
  if (devices == 1) return;
  for (int d = 0; d < devices; ++d) {
    workers_.push_back(std::make_unique<Worker>());
    Worker* w = workers_.back().get();
    w->thread = std::thread([w] { w->loop(); });
  }
}

DeviceWorkers::~DeviceWorkers() {
  for (auto& w : workers_) {
    {
      std::lock_guard<std::mutex> lock(w->mu);
      w->stopping = true;
    }
    w->cv.notify_one();
  }
  for (auto& w : workers_)
    w->thread.join();
}

std::future<void> DeviceWorkers::run(int device, std::function<void()> work) {
  if (device < 0 || device >= devices_)
    throw std::logic_error("DeviceWorkers::run: no device " + std::to_string(device));
  std::packaged_task<void()> task(std::move(work));
  std::future<void> done = task.get_future();
  if (workers_.empty()) {
    task();
    return done;
  }
  Worker& w = *workers_[device];
  {
    std::lock_guard<std::mutex> lock(w.mu);
    w.queue.push_back(std::move(task));
  }
  w.cv.notify_one();
  return done;
}

} // namespace tp::autotune
