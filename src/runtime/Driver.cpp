// Loading libcuda.so.1, error reporting for driver calls, the lazily current primary context,
// and device queries.
#include "runtime/Driver.h"
#include "runtime/ThreadDevice.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

#include "runtime/DeviceFaults.h"
#include "tilepilot/error.h"

#define TILEPILOT_STR_(x) #x
#define TILEPILOT_STR(x) TILEPILOT_STR_(x) // expands cuda.h's renames: "cuMemAlloc_v2"

namespace tp::rt {

namespace {

std::string version_text(int v) { // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

/// "driver().cuMemAlloc(&p, n)" -> "cuMemAlloc": the name users can look up.
std::string driver_function_name(const std::string& call) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i + 2 < call.size(); ++i) {
    if (call.compare(i, 2, "cu") != 0 || !std::isupper(static_cast<unsigned char>(call[i + 2])))
      continue;
    if (i > 0 && ident(call[i - 1])) continue;
    size_t j = i;
    while (j < call.size() && ident(call[j]))
      ++j;
    return call.substr(i, j - i);
  }
  return call;
}

struct DriverState {
  std::unique_ptr<Driver> driver;
  std::string why_not;
};

const DriverState& state() {
  static const DriverState s = [] {
    DriverState st;
    st.driver = Driver::load("libcuda.so.1", &st.why_not);
    return st;
  }();
  return s;
}

} // namespace

std::unique_ptr<Driver> Driver::load(const std::string& library, std::string* why_not) {
  std::string tried;
  auto lib = open_library({library}, &tried);
  if (!lib) {
    if (why_not) *why_not = "no CUDA driver was found (" + tried + ")";
    return nullptr;
  }
  auto d = std::make_unique<Driver>();
  d->lib = *lib;
  std::string missing;
#define TILEPILOT_X(n) d->n = reinterpret_cast<decltype(d->n)>(lib->symbol(TILEPILOT_STR(n)));
  TILEPILOT_CU_FUNCS(TILEPILOT_X)
  TILEPILOT_CU_OPTIONAL_FUNCS(TILEPILOT_X)
#undef TILEPILOT_X
  // cuEventElapsedTime_v2 (drivers for CUDA 12.8+) keeps the signature of the original.
  if (!d->cuEventElapsedTime)
    d->cuEventElapsedTime =
        reinterpret_cast<decltype(d->cuEventElapsedTime)>(lib->symbol("cuEventElapsedTime"));
#define TILEPILOT_X(n)                                                                             \
  if (!d->n) missing += std::string(missing.empty() ? "" : ", ") + TILEPILOT_STR(n);
  TILEPILOT_CU_FUNCS(TILEPILOT_X)
#undef TILEPILOT_X
  if (!missing.empty()) {
    if (why_not)
      *why_not = "the CUDA driver at " + lib->path + " is too old: it lacks " + missing +
                 ". Install a driver that supports CUDA " + version_text(CUDA_VERSION) + ".";
    return nullptr;
  }
  if (CUresult r = d->cuInit(0); r != CUDA_SUCCESS) {
    if (why_not) {
      const char* name = nullptr;
      const char* text = nullptr;
      d->cuGetErrorName(r, &name);
      d->cuGetErrorString(r, &text);
      *why_not = std::string("the CUDA driver did not initialize: cuInit failed: ") +
                 (name ? name : "?") + " (" + (text ? text : "?") + ")";
    }
    return nullptr;
  }
  d->cuDriverGetVersion(&d->version);
  return d;
}

Driver& driver() {
  const DriverState& s = state();
  if (!s.driver)
    user_error() << s.why_not
                 << ". Running kernels on a GPU needs the NVIDIA driver; the CPU backend and "
                    "compile-only stages (tilepilot show --stage ptx|resources) work without it.";
  return *s.driver;
}

bool driver_available(std::string* why_not) {
  const DriverState& s = state();
  if (!s.driver && why_not) *why_not = s.why_not;
  return s.driver != nullptr;
}

std::string cu_error_text(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (const Driver* d = state().driver.get()) {
    d->cuGetErrorName(r, &name);
    d->cuGetErrorString(r, &text);
  }
  if (!name) name = known_cu_error_name(r);
  std::string out = name ? name : "CUresult " + std::to_string(int(r));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

void check_cu(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  throw_cu_failure(r, driver_function_name(call));
}

int selected_device_ordinal() {
  static const int ordinal = [] {
    const char* env = std::getenv("TILEPILOT_DEVICE");
    if (!env || !*env) return 0;
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (*end || v < 0) user_error() << "TILEPILOT_DEVICE='" << env << "' is not a device ordinal";
    return int(v);
  }();
  return ordinal;
}

namespace {

thread_local int bound_ordinal = -1; // DeviceScope; -1: the selected device

struct Primary {
  CUdevice device = 0;
  CUcontext ctx = nullptr;
};

// Each device's primary context is retained once and never released: it lives as long as the
// process, and releasing it during static destruction would race the driver's own teardown.
Primary primary_context(int ordinal) {
  static std::mutex mu;
  static auto& retained = *new std::map<int, Primary>; // never destroyed, like the contexts
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = retained.find(ordinal); it != retained.end()) return it->second;
  Driver& d = driver();
  int count = 0;
  TILEPILOT_CU(d.cuDeviceGetCount(&count));
  if (ordinal >= count) {
    if (bound_ordinal >= 0)
      user_error() << "device " << ordinal << " was asked for, but this machine has " << count
                   << " CUDA device(s)";
    user_error() << "TILEPILOT_DEVICE=" << ordinal << " but this machine has " << count
                 << " CUDA device(s)";
  }
  Primary p;
  TILEPILOT_CU(d.cuDeviceGet(&p.device, ordinal));
  TILEPILOT_CU(d.cuDevicePrimaryCtxRetain(&p.ctx, p.device));
  return retained.emplace(ordinal, p).first->second;
}

} // namespace

DeviceScope::DeviceScope(int ordinal) : previous_(bound_ordinal) {
  if (ordinal < 0) user_error() << "DeviceScope: device ordinal " << ordinal << " is negative";
  bound_ordinal = ordinal;
}

DeviceScope::~DeviceScope() {
  bound_ordinal = previous_;
}

int thread_device_ordinal() {
  return bound_ordinal >= 0 ? bound_ordinal : selected_device_ordinal();
}

CUdevice ensure_context() {
  // The current context is per thread; this thread's last one is remembered so that the hot
  // path (every launch and copy) costs no driver call and no lock.
  thread_local int current_ordinal = -1;
  thread_local Primary current;
  int ordinal = thread_device_ordinal();
  if (ordinal != current_ordinal) {
    Primary p = primary_context(ordinal);
    TILEPILOT_CU(driver().cuCtxSetCurrent(p.ctx));
    current = p;
    current_ordinal = ordinal;
  }
  return current.device;
}

std::string arch_for(int cc_major, int cc_minor) {
  return "sm_" + std::to_string(cc_major * 10 + cc_minor) + (cc_major >= 9 ? "a" : "");
}

int device_count(std::string* why_not) {
  if (!driver_available(why_not)) return 0;
  int n = 0;
  if (CUresult r = driver().cuDeviceGetCount(&n); r != CUDA_SUCCESS) {
    if (why_not) *why_not = "cuDeviceGetCount failed: " + cu_error_text(r);
    return 0;
  }
  if (n == 0 && why_not) *why_not = "the CUDA driver reports no devices";
  return n;
}

std::optional<DeviceInfo> device_info(int ordinal, std::string* why_not) {
  int n = device_count(why_not);
  if (ordinal < 0 || ordinal >= n) {
    if (why_not && n > 0)
      *why_not = "no CUDA device " + std::to_string(ordinal) + " (this machine has " +
                 std::to_string(n) + ")";
    return std::nullopt;
  }
  try {
    Driver& d = driver();
    CUdevice dev;
    TILEPILOT_CU(d.cuDeviceGet(&dev, ordinal));
    DeviceInfo info;
    info.ordinal = ordinal;
    char name[256] = {};
    TILEPILOT_CU(d.cuDeviceGetName(name, sizeof name - 1, dev));
    info.name = name;
    size_t bytes = 0;
    TILEPILOT_CU(d.cuDeviceTotalMem(&bytes, dev));
    info.total_memory_bytes = bytes;
    auto attr = [&](CUdevice_attribute a, int* out, bool required) {
      CUresult r = d.cuDeviceGetAttribute(out, a, dev);
      if (r != CUDA_SUCCESS && required) check_cu(r, "cuDeviceGetAttribute");
      if (r != CUDA_SUCCESS) *out = -1;
    };
    attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info.cc_major, true);
    attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info.cc_minor, true);
    attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info.sm_count, true);
    attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &info.l2_bytes, true);
    attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &info.max_shared_per_block_optin,
         true);
    attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &info.max_shared_per_sm, true);
    // Clocks are informational (napkin-math ceilings); some drivers no longer report them.
    attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, &info.clock_khz, false);
    attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &info.memory_clock_khz, false);
    attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &info.memory_bus_bits, false);
    info.arch = arch_for(info.cc_major, info.cc_minor);
    info.driver_version = version_text(d.version);
    return info;
  } catch (const UserError& e) {
    if (why_not) *why_not = e.what();
    return std::nullopt;
  }
}

} // namespace tp::rt
