// Runtime dispatch of any registered operator (built-in or plug-in): Dispatcher::run(op, ...)
// runs the pilot's pinned kernel only when the device (name and arch), the dtype and the exact shape lie
// inside a release's tested matrix (the `release/` folder `tilepilot pilot` writes). Anything
// else runs the fallback - cuBLASLt / cuDNN SDPA on the GPU (the unfused fp32 GPU reference when
// those libraries are missing), the fp64 reference on host tensors - and is counted per reason
// and logged once per (operator, reason), so a silent slow path cannot hide.
//
// Host tensors run the pinned kernel on the CPU interpreter, which then stands in for the
// released device (unless DispatchOptions::device says otherwise): that makes every decision
// testable on a machine without a GPU.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tilepilot/problem.h"
#include "tilepilot/tensor.h"

namespace tp::ops {

/// Why a call did not run the pinned kernel.
enum class FallbackReason : uint8_t {
  forced,               // the caller asked for the fallback (DispatchOptions / force_fallback)
  no_release,           // no release folder for this operator was given
  release_invalid,      // a release folder was given but fails to load (hash, format, JSON)
  device_mismatch,      // the device's name or arch is not the released one
  dtype_outside_matrix, // the dtype was not tested on this device
  shape_outside_matrix, // the exact shape (and layout / mask) was not tested, or has no pin
  failed_test,          // the shape was tested and failed its correctness check
  compile_failed,       // the pinned config does not build, compile or load here
  library_missing,      // the pinned kernel needs NVRTC / the driver, and it is missing
  device_out_of_memory, // device memory ran out loading or launching the pinned kernel (this
                        // call only: the next one tries the pinned kernel again)
  framework_faster,     // the shape was tested, and the pilot measured the framework faster
                        // there (a release with objective.route per_shape)
};
inline constexpr int kFallbackReasons = 11;
/// "shape_outside_matrix", ...: stable names for JSON and logs.
const char* fallback_reason_name(FallbackReason r);

/// The device a release is matched against: "NVIDIA H200", "sm_90a".
struct DeviceIdentity {
  std::string name, arch;
};

struct DispatchOptions {
  /// Release folders, at most one per operator (each manifest names its operator).
  std::vector<std::string> releases;
  /// Operators ("gemm", "attention") whose calls always take the fallback.
  std::set<std::string> force_fallback;
  /// The device releases are matched against. Default: GPU 0 (or $TILEPILOT_DEVICE) for device
  /// calls; for host calls the interpreter stands in for each release's own device.
  std::optional<DeviceIdentity> device;
  /// Libraries to treat as missing: "NVRTC" (pinned kernels on the GPU), "cuBLASLt", "cuDNN".
  /// For A/B runs against the unfused reference and for tests of the missing-library paths.
  std::set<std::string> disable_libraries;
  /// Where the once-per-reason lines go; default: stderr, prefixed "tilepilot: dispatch: ".
  std::function<void(const std::string&)> log;
};

/// What one operator's calls did since construction (or reset_counters()).
struct OpCounters {
  int64_t pinned = 0;
  std::array<int64_t, kFallbackReasons> fallback{}; // indexed by FallbackReason
  std::map<std::string, int64_t> fallback_impl;     // "cuBLASLt": 3, "fp64 CPU reference": 2
  int64_t fallbacks() const;
  int64_t count(FallbackReason r) const { return fallback[static_cast<int>(r)]; }
};

/// A device tensor at `ptr` (a CUdeviceptr): row-major and contiguous when `strides` is empty,
/// else a view with these strides (elements, outermost first, PyTorch's convention). Only the
/// arguments an operator declares strided (Operator::strided_arg) may be non-contiguous views;
/// Dispatcher::run gives a user error for any other.
struct DeviceView {
  uint64_t ptr = 0;
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides = {};
};

/// A kernel config pinned for one problem without a release folder (see Dispatcher::pin).
struct Pin {
  Problem problem;
  Config config;
};

/// Where a problem goes and why, without running it.
struct DispatchDecision {
  bool pinned = false;
  FallbackReason reason = FallbackReason::no_release; // when !pinned
  std::string why;                                    // when !pinned: for people
  std::map<std::string, int64_t> config;              // when pinned
};

class Dispatcher {
public:
  /// Loads the release folders now. A folder that fails to load is not an error here: its
  /// operator falls back with reason release_invalid and the loader's message. Two folders for
  /// one operator are a user error.
  explicit Dispatcher(DispatchOptions options = {});
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  /// Runs operator `op` on host tensors `args`, in its parameter order (inputs, then outputs,
  /// written in place), with its string options (gemm's layout, attention's causal). The
  /// problem comes from the tensors' shapes (Operator::problem_for); a user error names the
  /// tensor that does not fit.
  void run(const std::string& op, const std::vector<HostTensor*>& args,
           const std::map<std::string, std::string>& options = {});
  /// The same for a braced list, `run("softcap", {&x, &y})`: without it a two-element list
  /// would also read as an iterator pair of the device overload's vector.
  void run(const std::string& op, std::initializer_list<HostTensor*> args,
           const std::map<std::string, std::string>& options = {}) {
    run(op, std::vector<HostTensor*>(args), options);
  }
  /// The same on device tensors, enqueued on `stream` (a CUstream; null: the default stream).
  void run(const std::string& op, const std::vector<DeviceView>& args,
           const std::map<std::string, std::string>& options = {}, void* stream = nullptr);

  /// The built-in operators' calls, on run():
  /// C = op(A) op(B) on host tensors; layout nn (A [M, K], B [K, N]), nt (B [N, K]) or tn
  /// (A [K, M]); C is [M, N]; one dtype for all three (bf16, f16, f32).
  void gemm(const HostTensor& A, const HostTensor& B, HostTensor& C,
            const std::string& layout = "nn");
  /// O = softmax(Q K^T / sqrt(D) + mask) V on host tensors: Q, O [B, H, S, D], K, V
  /// [B, Hkv, Skv, D]; causal is bottom-right aligned (see ops/AttentionOp.h).
  void attention(const HostTensor& Q, const HostTensor& K, const HostTensor& V, HostTensor& O,
                 bool causal);

  /// The same on device tensors, enqueued on `stream` (a CUstream; null: the default stream).
  void gemm(const DeviceView& A, const DeviceView& B, const DeviceView& C,
            const std::string& layout = "nn", void* stream = nullptr);
  void attention(const DeviceView& Q, const DeviceView& K, const DeviceView& V, const DeviceView& O,
                 bool causal, void* stream = nullptr);

  /// The decision for an operator problem ("gemm" M=..,N=..,K=.., layout=..; "attention"
  /// B,H,Hkv,S,Skv,D,causal), for host calls (`device` false) or device calls.
  DispatchDecision decide(const std::string& op, const std::map<std::string, std::string>& shape,
                          DType dtype, bool device);

  /// Installs `pins` (problems of `op`) as an in-memory release for `device`, replacing any
  /// release of `op`. The pinned problems count as tested and passed: the caller vouches for
  /// them (the pilot's model stage pins configs its correctness stage passed).
  void pin(const std::string& op, const DeviceIdentity& device, const std::vector<Pin>& pins);
  /// Whether `op` has a release (a folder, or pinned in memory); `source`, if given, gets its
  /// folder, "(in memory)", or "(invalid: <why>)" for a folder that failed to load.
  bool has_release(const std::string& op, std::string* source = nullptr) const;

  void force_fallback(const std::string& op, bool on);
  OpCounters counters(const std::string& op) const;
  void reset_counters();
  /// "gemm: 6 pinned, 2 fallback (shape_outside_matrix 2; cuBLASLt 2)", one line per operator.
  std::string summary() const;

  struct Impl;

private:
  friend struct DispatcherAccess; // the dispatch layer's own code (src/dispatch)
  std::unique_ptr<Impl> impl_;
};

/// GPU 0 (or $TILEPILOT_DEVICE) as releases see it; a UserError when there is no usable GPU.
DeviceIdentity current_device();
/// The operator's default config for `p` on `arch` ("sm_90a"; "cpu" for the interpreter).
Config default_config(const Problem& p, const std::string& arch);
/// A UserError naming the known operators when `op` is not one of them.
void require_operator(const std::string& op);

/// The process-wide dispatcher: releases from $TILEPILOT_RELEASE (folders separated by ':'),
/// created at first use.
Dispatcher& default_dispatcher();

/// The free functions run on default_dispatcher().
void gemm(const HostTensor& A, const HostTensor& B, HostTensor& C,
          const std::string& layout = "nn");
void attention(const HostTensor& Q, const HostTensor& K, const HostTensor& V, HostTensor& O,
               bool causal);
void gemm(const DeviceView& A, const DeviceView& B, const DeviceView& C,
          const std::string& layout = "nn", void* stream = nullptr);
void attention(const DeviceView& Q, const DeviceView& K, const DeviceView& V, const DeviceView& O,
               bool causal, void* stream = nullptr);

} // namespace tp::ops
