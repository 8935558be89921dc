// `tilepilot._core`: the nanobind extension over the static core library. Errors keep their
// meaning across the boundary: bad input (tp::UserError) is a ValueError, a TilePilot bug
// (tp::InternalError) a RuntimeError that says it is one. The GPU's own errors get their own
// types, so a caller can tell them apart: DeviceFault (a RuntimeError; the CUDA context is lost,
// the process must restart its GPU work) and DeviceOutOfMemory (a MemoryError, like
// torch.cuda.OutOfMemoryError is a RuntimeError: the problem is too large for the free memory).
#include "bindings.h"

#include "runtime/BuildInfo.h"
#include "tilepilot/device_error.h"
#include "tilepilot/error.h"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "TilePilot core (C++): CPU interpreter, CUDA dispatch, checks";
  m.attr("version") = TILEPILOT_VERSION;
  m.attr("git_commit") = tp::rt::build_git_commit();

  static nb::exception<tp::DeviceFault> device_fault(m, "DeviceFault", PyExc_RuntimeError);
  static nb::exception<tp::DeviceOutOfMemory> device_oom(m, "DeviceOutOfMemory", PyExc_MemoryError);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    auto strip = [](std::string msg) { // "error: OP: ..." reads for a terminal
      if (msg.rfind("error: ", 0) == 0) msg.erase(0, 7);
      return msg;
    };
    try {
      std::rethrow_exception(p);
    } catch (const tp::DeviceFault& e) {
      PyErr_SetString(device_fault.ptr(), strip(e.what()).c_str());
    } catch (const tp::DeviceOutOfMemory& e) {
      PyErr_SetString(device_oom.ptr(), strip(e.what()).c_str());
    } catch (const tp::InternalError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what()); // already says it is a TilePilot bug
    } catch (const tp::UserError& e) {
      // The core's text reads "error: OP: ..." for a terminal; Python names the type itself.
      std::string msg = e.what();
      if (msg.rfind("error: ", 0) == 0) msg.erase(0, 7);
      PyErr_SetString(PyExc_ValueError, msg.c_str());
    }
  });

  tp::py::bind_host_ops(m);
  tp::py::bind_device_ops(m);
  tp::py::bind_info(m);
  tp::py::bind_plugin_ops(m);
}
