// How a failed driver call is reported. A sticky error (the GPU stopped a kernel: trap, illegal
// or misaligned address, assert, time limit) is a tp::DeviceFault naming the last kernel
// TilePilot launched and how to reproduce; out of memory is a tp::DeviceOutOfMemory with the
// bytes asked for; anything else is a UserError naming the call. check_cu() (Driver.h) routes
// every TILEPILOT_CU call through here.
#pragma once
#include <array>
#include <cstdint>
#include <cuda.h>
#include <optional>
#include <string>

#include "tilepilot/device_error.h"

namespace tp::rt {

struct LaunchConfig;

enum class CuFailure { none, sticky_fault, out_of_memory, other };
CuFailure classify(CUresult r);

/// "CUDA_ERROR_ILLEGAL_ADDRESS" for the codes classify() knows, so messages name them even
/// when the driver cannot be asked (tests without a GPU); nullptr for the rest.
const char* known_cu_error_name(CUresult r);

/// The last kernel launched in this process, as a fault message names it.
struct LaunchRecord {
  std::string kernel; // "" for a launch through rt::launch alone (reference, framework, raw)
  std::array<unsigned, 3> grid{}, block{};
  unsigned shared_bytes = 0;
  std::string context;     // the LaunchContext active at the launch ("" when none)
  std::string str() const; // "'gemm_nn' (grid 4x4x1, block 128x1x1, 49152 B shared; ...)"
};

/// Called after every successful kernel launch. A fault surfaces at a later call (a sync, a
/// copy, the next launch), so the record is of the kernel that was launched before it.
void note_launch(const std::string& kernel, const LaunchConfig& config);
std::optional<LaunchRecord> last_launch();
void forget_last_launch(); // for tests

/// While alive, launches on this thread record `what` beside the kernel ("gemm M=64,N=64,K=64
/// config bm=64,..."): the kernel name alone does not say which operator config ran.
class LaunchContext {
public:
  explicit LaunchContext(std::string what);
  ~LaunchContext();
  LaunchContext(const LaunchContext&) = delete;
  LaunchContext& operator=(const LaunchContext&) = delete;

private:
  std::string previous_;
};

/// Throws the error `r` of `call` is: DeviceFault, DeviceOutOfMemory (`bytes` asked for, 0 when
/// unknown) or UserError. `r` must not be CUDA_SUCCESS.
[[noreturn]] void throw_cu_failure(CUresult r, const std::string& call, uint64_t bytes = 0);

/// For allocations: out of memory names `bytes` and what is free.
void check_cu_alloc(CUresult r, const char* call, uint64_t bytes);

} // namespace tp::rt
