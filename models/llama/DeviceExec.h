// The model on the GPU: glue kernels compiled through the public kernel API, operators through
// the dispatcher's device path, everything on one stream. With profiling on,
// each operator is bracketed by a pair of CUDA events and device memory is sampled after it.
#pragma once
#include <deque>
#include <map>
#include <memory>

#include "llama/Exec.h"
#include "tilepilot/compile.h"
#include "tilepilot/device.h"

namespace tp::models {

class DeviceExec : public Exec {
public:
  /// User error saying what is missing when there is no usable GPU.
  DeviceExec();

  bool on_device() const override { return true; }
  Buf alloc(DType t, std::vector<int64_t> shape) override;
  void fill_uniform(Buf& b, uint64_t seed, double center, double half_width) override;
  void upload(Buf& b, const HostTensor& h) override;
  HostTensor download(const Buf& b) override;
  void run(const Kernel& k, const std::vector<const Buf*>& args) override;
  void dispatch(const std::string& op, const std::vector<Buf>& args,
                const std::map<std::string, std::string>& options) override;
  void op_begin(const std::string& label) override;
  void op_end(const std::string& label) override;

  Stream stream() const { return stream_.get(); }
  void synchronize() const { stream_.synchronize(); }
  void set_profiling(bool on) { profiling_ = on; }
  /// Waits for the stream and returns the time of each operator recorded since the last call.
  OpTimes collect_op_times();

  /// Device memory in use now (all of the device), and the highest value seen after an
  /// operator while profiling since reset_peak().
  uint64_t device_used_bytes() const { return device_memory().used_bytes(); }
  uint64_t peak_used_bytes() const { return peak_used_; }
  void reset_peak() { peak_used_ = device_used_bytes(); }
  /// Device memory in use when this executor was created (before any model buffer).
  uint64_t baseline_used_bytes() const { return baseline_used_; }
  /// Bytes of the buffers this executor allocated (weights, tables, activations).
  size_t allocated_bytes() const { return bytes_; }
  const ops::DeviceIdentity& device() const { return device_; }

private:
  Event& event();

  ops::DeviceIdentity device_; // first: a clear error when there is no GPU
  CudaStream stream_;
  std::deque<DeviceArray> store_;
  std::map<const void*, CompiledKernel> kernels_; // by kernel node
  bool profiling_ = false;
  std::deque<Event> pool_;
  size_t next_event_ = 0;
  std::vector<std::pair<std::string, std::pair<Event*, Event*>>> marks_;
  Event* open_ = nullptr;
  uint64_t baseline_used_ = 0, peak_used_ = 0;
  size_t bytes_ = 0;
};

} // namespace tp::models
