// `tilepilot._core`: the nanobind extension over the static core library. Errors keep their
// meaning across the boundary: bad input (tp::UserError) is a ValueError, a TilePilot bug
// (tp::InternalError) a RuntimeError that says it is one.
#include "bindings.h"

#include "runtime/BuildInfo.h"
#include "tilepilot/error.h"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "TilePilot core (C++): CPU interpreter, CUDA dispatch, checks";
  m.attr("version") = TILEPILOT_VERSION;
  m.attr("git_commit") = tp::rt::build_git_commit();

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
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
