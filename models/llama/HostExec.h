// The model on host tensors: glue kernels on the CPU interpreter, operators through the
// dispatcher's host path (interpreter or fp64 reference). Small configs only.
#pragma once
#include <chrono>
#include <deque>

#include "llama/Exec.h"

namespace tp::models {

class HostExec : public Exec {
public:
  bool on_device() const override { return false; }
  Buf alloc(DType t, std::vector<int64_t> shape) override;
  void fill_uniform(Buf& b, uint64_t seed, double center, double half_width) override;
  void upload(Buf& b, const HostTensor& h) override;
  HostTensor download(const Buf& b) override { return *b.host; }
  void run(const Kernel& k, const std::vector<const Buf*>& args) override;
  void dispatch(const std::string& op, const std::vector<Buf>& args,
                const std::map<std::string, std::string>& options) override;
  void op_begin(const std::string& label) override;
  void op_end(const std::string& label) override;

  /// Wall time per operator label since the last reset (always recorded on the host).
  const OpTimes& op_times() const { return times_; }
  void reset_times() { times_.clear(); }
  size_t allocated_bytes() const { return bytes_; }

private:
  std::deque<HostTensor> store_; // stable addresses for Buf::host
  OpTimes times_;
  std::chrono::steady_clock::time_point t0_;
  size_t bytes_ = 0;
};

} // namespace tp::models
