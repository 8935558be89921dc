// Test-only fakes of the tuner's backend hooks: a FakeBackend decides, per config, how long a
// compile takes, whether it fails or spills, how fast the kernel "runs" and whether it is
// correct, and counts every call; measure and check_correct accept `devices` fake devices and
// record when each call ran on which. Nothing here touches NVRTC or a GPU.
#pragma once
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "autotune/ConfigSpace.h"
#include "autotune/Hooks.h"
#include "runtime/Driver.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace tp::autotune::testing {

// A space of `n` configs (bm = 16, 32, ...), kept in that order; no operator needed.
inline ConfigSpace space_of(int n) {
  ConfigSpace s;
  for (int i = 1; i <= n; ++i) {
    Candidate c;
    c.config = {{"bm", 16 * i}};
    s.kept.push_back(c);
  }
  return s;
}

struct FakeBehaviour {
  double ms = 1.0;                 // every sample of a measurement
  double compile_sleep_s = 0;      // how long compile takes
  double measure_sleep_s = 0;      // per measure call
  bool compile_throws = false;     // std::runtime_error ("ptxas fatal")
  bool compile_user_error = false; // tp::UserError (verifier rejected)
  bool measure_throws = false;
  int spill_bytes = 0;
  bool wrong = false;          // check_correct fails
  bool measure_faults = false; // measure hits a sticky CUDA error (tp::DeviceFault)
};

/// Shared by the hooks through shared_ptr, so an abandoned compile never outlives it.
struct FakeBackend {
  std::function<FakeBehaviour(const ops::Config&)> behaviour = [](const ops::Config&) {
    return FakeBehaviour{};
  };
  std::atomic<int> compiles{0}, checks{0}, measures{0};
  std::atomic<int> running{0}, max_running{0};
  std::mutex mu;
  std::vector<std::pair<std::string, int>> measure_calls; // (config, iters), in call order
  int devices = 1;         // the fake devices measure and check_correct accept
  int failing_device = -1; // measure throws on this device, whatever the config
  struct Use {
    int device;
    std::string what; // "measure bm=16", "check bm=16"
    std::chrono::steady_clock::time_point begin, end;
  };
  std::vector<Use> uses; // every measure and check_correct call, when it ran and where
};

/// Records one hook call's interval on its device (also when the call throws).
struct Interval {
  FakeBackend& fb;
  FakeBackend::Use use;
  Interval(FakeBackend& b, int device, std::string what)
      : fb(b), use{device, std::move(what), std::chrono::steady_clock::now(), {}} {}
  ~Interval() {
    use.end = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(fb.mu);
    fb.uses.push_back(use);
  }
};

inline void fake_sleep(double s) {
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

inline TuneHooks fake_hooks(std::shared_ptr<FakeBackend> fb) {
  TuneHooks h;
  h.compile = [fb](const ops::Config& c) {
    FakeBehaviour b = fb->behaviour(c);
    int now = ++fb->running;
    for (int m = fb->max_running; now > m && !fb->max_running.compare_exchange_weak(m, now);) {}
    fake_sleep(b.compile_sleep_s);
    --fb->running;
    ++fb->compiles;
    if (b.compile_throws) throw std::runtime_error("fake ptxas: fatal error");
    if (b.compile_user_error) user_error() << "fake verifier: tile does not fit";
    CompiledCandidate cc;
    cc.usage.registers = 128;
    cc.usage.spill_store_bytes = b.spill_bytes;
    cc.usage.spill_load_bytes = b.spill_bytes;
    cc.artifact = std::make_shared<int>(42);
    return cc;
  };
  h.devices = fb->devices;
  h.check_correct = [fb](int device, const ops::Config& c, const CompiledCandidate& cc,
                         std::string* why) {
    if (device < 0 || device >= fb->devices) throw std::logic_error("check_correct: bad device");
    Interval on(*fb, device, "check " + ops::config_str(c));
    ++fb->checks;
    if (!cc.artifact) throw std::logic_error("check_correct got no artifact");
    if (fb->behaviour(c).wrong) {
      *why = "fake check: max_abs_err 3.5 > atol 0.02";
      return false;
    }
    return true;
  };
  h.measure = [fb](int device, const ops::Config& c, const CompiledCandidate&, int iters) {
    if (device < 0 || device >= fb->devices) throw std::logic_error("measure: bad device");
    Interval on(*fb, device, "measure " + ops::config_str(c));
    FakeBehaviour b = fb->behaviour(c);
    ++fb->measures;
    {
      std::lock_guard<std::mutex> lock(fb->mu);
      fb->measure_calls.emplace_back(ops::config_str(c), iters);
    }
    fake_sleep(b.measure_sleep_s);
    if (b.measure_throws) throw std::runtime_error("fake launch failure");
    if (device == fb->failing_device)
      throw std::runtime_error("fake device " + std::to_string(device) + " lost");
    if (b.measure_faults) rt::check_cu(CUDA_ERROR_ILLEGAL_ADDRESS, "cuEventSynchronize(stop_)");
    return Measurement{std::vector<double>(iters, b.ms)};
  };
  return h;
}

/// A device for keys and limits: an H200-like sm_90a part.
inline rt::DeviceInfo fake_h200() {
  rt::DeviceInfo d;
  d.name = "Fake H200 (test)";
  d.cc_major = 9;
  d.arch = "sm_90a";
  d.sm_count = 132;
  d.max_shared_per_block_optin = 227 * 1024;
  d.driver_version = "13.0";
  return d;
}

} // namespace tp::autotune::testing
