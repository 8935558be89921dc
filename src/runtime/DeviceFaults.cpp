// Classifying failed driver calls, the launch record fault messages name, and the messages.
#include "runtime/DeviceFaults.h"

#include <fstream>
#include <mutex>
#include <sstream>

#include "runtime/DeviceBuffer.h"
#include "runtime/Driver.h"
#include "runtime/Launch.h"

namespace tp::rt {

namespace {

std::mutex launch_mutex;
std::optional<LaunchRecord>& launch_slot() {
  static std::optional<LaunchRecord> r;
  return r;
}
thread_local std::string launch_context;

/// The command line of this process, shell-quoted where needed: what to rerun under
/// compute-sanitizer. "" when /proc does not say.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg, out;
  while (std::getline(in, arg, '\0')) {
    bool plain = !arg.empty() && arg.find_first_of(" \t'\"|&;<>()$`\\*?") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? arg : "'" + arg + "'");
  }
  return out;
}

} // namespace

CuFailure classify(CUresult r) {
  switch (r) {
  case CUDA_SUCCESS:
    return CuFailure::none;
  case CUDA_ERROR_OUT_OF_MEMORY:
    return CuFailure::out_of_memory;
  // The errors after which the context is unusable (CUDA driver API, "sticky" errors).
  case CUDA_ERROR_ECC_UNCORRECTABLE:
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_LAUNCH_TIMEOUT:
  case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_LAUNCH_FAILED:
    return CuFailure::sticky_fault;
  default:
    return CuFailure::other;
  }
}

const char* known_cu_error_name(CUresult r) {
  switch (r) {
  case CUDA_ERROR_OUT_OF_MEMORY:
    return "CUDA_ERROR_OUT_OF_MEMORY";
  case CUDA_ERROR_ECC_UNCORRECTABLE:
    return "CUDA_ERROR_ECC_UNCORRECTABLE";
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    return "CUDA_ERROR_ILLEGAL_ADDRESS";
  case CUDA_ERROR_LAUNCH_TIMEOUT:
    return "CUDA_ERROR_LAUNCH_TIMEOUT";
  case CUDA_ERROR_ASSERT:
    return "CUDA_ERROR_ASSERT";
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
    return "CUDA_ERROR_HARDWARE_STACK_ERROR";
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    return "CUDA_ERROR_ILLEGAL_INSTRUCTION";
  case CUDA_ERROR_MISALIGNED_ADDRESS:
    return "CUDA_ERROR_MISALIGNED_ADDRESS";
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    return "CUDA_ERROR_INVALID_ADDRESS_SPACE";
  case CUDA_ERROR_INVALID_PC:
    return "CUDA_ERROR_INVALID_PC";
  case CUDA_ERROR_LAUNCH_FAILED:
    return "CUDA_ERROR_LAUNCH_FAILED";
  default:
    return nullptr;
  }
}

std::string LaunchRecord::str() const {
  std::ostringstream s;
  s << (kernel.empty() ? "an unnamed kernel (a reference, framework or raw launch)"
                       : "'" + kernel + "'")
    << " (grid " << grid[0] << "x" << grid[1] << "x" << grid[2] << ", block " << block[0] << "x"
    << block[1] << "x" << block[2] << ", " << shared_bytes << " B dynamic shared memory"
    << (context.empty() ? "" : "; " + context) << ")";
  return s.str();
}

void note_launch(const std::string& kernel, const LaunchConfig& c) {
  std::lock_guard<std::mutex> l(launch_mutex);
  auto& slot = launch_slot();
  if (!slot) slot.emplace();
  slot->kernel = kernel; // assignments reuse the slot's storage: no allocation per launch
  slot->grid = c.grid;
  slot->block = c.block;
  slot->shared_bytes = c.shared_bytes;
  slot->context = launch_context;
}

std::optional<LaunchRecord> last_launch() {
  std::lock_guard<std::mutex> l(launch_mutex);
  return launch_slot();
}

void forget_last_launch() {
  std::lock_guard<std::mutex> l(launch_mutex);
  launch_slot().reset();
}

LaunchContext::LaunchContext(std::string what) : previous_(std::move(launch_context)) {
  launch_context = std::move(what);
}

LaunchContext::~LaunchContext() {
  launch_context = std::move(previous_);
}

void throw_cu_failure(CUresult r, const std::string& call, uint64_t bytes) {
  const std::string text = cu_error_text(r);
  const char* known = known_cu_error_name(r);
  switch (classify(r)) {
  case CuFailure::sticky_fault: {
    std::optional<LaunchRecord> last = last_launch();
    std::ostringstream m;
    m << "error: the GPU stopped a kernel: " << call << " reported " << text
      << " (a trap, an out-of-bounds or misaligned access, a device assert or a time limit). ";
    if (last)
      m << "The last kernel TilePilot launched before this was " << last->str()
        << "; with several kernels in flight an earlier one may be at fault. ";
    else
      m << "No TilePilot kernel was launched before it, so a library kernel (cuBLASLt, cuDNN) "
           "or a kernel of the caller's faulted. ";
    m << "The CUDA context is lost: every later GPU call in this process fails, so nothing more "
         "was measured or stored; start a new process. To find the faulting access, rerun under "
         "compute-sanitizer";
    if (std::string cmd = command_line(); !cmd.empty())
      m << ": compute-sanitizer --tool memcheck " << cmd;
    m << " (a pilot's saved failing case reruns with `tilepilot repro DIR/repro`)";
    throw DeviceFault(m.str(), known ? known : text, last ? last->kernel : "");
  }
  case CuFailure::out_of_memory: {
    std::ostringstream m;
    m << "error: out of device memory: " << call;
    if (bytes) m << " of " << format_bytes(bytes) << " (" << bytes << " bytes)";
    m << " failed: " << text << " on device " << selected_device_ordinal();
    size_t free = 0, total = 0;
    if (driver_available() && driver().cuMemGetInfo(&free, &total) == CUDA_SUCCESS)
      m << "; " << format_bytes(free) << " of " << format_bytes(total) << " is free";
    m << ". Use smaller shapes, free device memory (other processes on this GPU count too), or "
         "a GPU with more memory";
    throw DeviceOutOfMemory(m.str(), bytes);
  }
  default:
    user_error() << call << " failed: " << text;
  }
  throw std::logic_error("unreachable"); // user_error() threw
}

void check_cu_alloc(CUresult r, const char* call, uint64_t bytes) {
  if (r != CUDA_SUCCESS) throw_cu_failure(r, call, bytes);
}

} // namespace tp::rt
