// Device execution of dispatched calls.
#include "dispatch/DeviceRun.h"

#include <algorithm>
#include <cctype>

#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "runtime/Nvrtc.h"

namespace tp::dispatch {

ops::DeviceIdentity current_device() {
  std::string why;
  auto info = rt::device_info(rt::selected_device_ordinal(), &why);
  if (!info)
    user_error() << "dispatch: device tensors need a GPU: " << why
                 << "; on a machine without one, call the host-tensor overloads";
  return {info->name, info->arch};
}

DeviceRun::DeviceRun(std::set<std::string> disabled,
                     std::function<void(const std::string&, const std::string&)> note)
    : disabled_(std::move(disabled)), note_(std::move(note)) {
  arch_ = current_device().arch;
  rt::ensure_context();
}

DeviceRun::~DeviceRun() = default;

std::shared_ptr<ops::CudaProgram> DeviceRun::kernel(const ops::KernelProgram& prog) {
  return std::make_shared<ops::CudaProgram>(prog, arch_);
}

void DeviceRun::prepare(ops::CudaProgram& ck, const std::vector<cuda::DeviceTensor>& args,
                        bool* missing) {
  *missing = false;
  if (disabled("NVRTC")) {
    *missing = true;
    user_error() << "NVRTC is disabled (DispatchOptions::disable_libraries)";
  }
  try {
    ck.prepare(args);
  } catch (const Error&) {
    // A cubin already in the kernel cache loads without NVRTC; only a failed compile with
    // NVRTC absent is a missing library rather than a config that does not compile.
    std::string why;
    *missing = !rt::nvrtc_available(&why);
    throw;
  }
}

std::string DeviceRun::fallback(const ops::Problem& p, const std::vector<cuda::DeviceTensor>& a,
                                CUstream s) {
  const std::string key = dtype_name(p.dtype) + std::string(" ") + p.op + " " + p.shape_str();
  std::unique_ptr<ops::Framework>& fw = frameworks_[key];
  if (!fw) {
    ops::FrameworkOptions o;
    o.disabled_libraries = disabled_;
    o.note = note_;
    fw = ops::find_operator(p.op).framework(p, o);
  }
  fw->run(a, s);
  // Counters group by implementation, not by library version: "cuBLASLt 13.1.0" -> "cuBLASLt".
  std::string name = fw->name();
  const size_t sp = name.rfind(' ');
  if (sp != std::string::npos && sp + 1 < name.size() &&
      std::isdigit(static_cast<unsigned char>(name[sp + 1])))
    name.resize(sp);
  return name;
}

} // namespace tp::dispatch
