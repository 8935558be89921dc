// Plug-ins from Python: load one (its operators join the registry that every other binding
// uses), and describe a call of any operator from its inputs alone - the problem's keys and the
// outputs' dtypes and shapes - which is what a torch op needs for its fake implementation and
// to allocate its outputs.
#include <algorithm>
#include <dlfcn.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "ops/Operator.h"
#include "tilepilot/error.h"
#include "tilepilot/plugin.h"

namespace nb = nanobind;

namespace tp::py {

namespace {

/// A plug-in resolves TilePilot's symbols against the program that loads it. Python loads this
/// module with RTLD_LOCAL, so it is promoted to the global scope once before the first plug-in.
void make_module_global() {
  static bool done = false;
  if (done) return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&make_module_global), &info) && info.dli_fname)
    if (!dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL))
      user_error() << "load_plugin: cannot make TilePilot's symbols visible to plug-ins ("
                   << dlerror() << ")";
  done = true;
}

std::vector<std::string> load_plugin(const std::string& path) {
  make_module_global();
  std::vector<std::string> before;
  for (const ops::Operator* op : ops::all_operators())
    before.push_back(op->name());
  ops::load_plugin(path);
  std::vector<std::string> added;
  for (const ops::Operator* op : ops::all_operators())
    if (std::find(before.begin(), before.end(), op->name()) == before.end())
      added.push_back(op->name());
  return added;
}

using Shape = std::vector<int64_t>;

/// (problem keys, [(output dtype, output shape)], output indices) of `op` called on inputs of
/// these shapes and dtypes with these options.
std::tuple<std::map<std::string, std::string>, std::vector<std::pair<std::string, Shape>>,
           std::vector<int>>
describe_call(const std::string& op_name, const std::vector<Shape>& shapes,
              const std::vector<std::string>& dtypes,
              const std::map<std::string, std::string>& options) {
  const ops::Operator& op = ops::find_operator(op_name);
  std::vector<DType> dts;
  for (const std::string& d : dtypes) {
    auto t = parse_dtype(d);
    if (!t) user_error() << op_name << ": dtype '" << d << "' is not known";
    dts.push_back(*t);
  }
  ops::Problem p = op.problem_from_inputs(shapes, dts, options);
  std::map<std::string, std::string> keys = p.options;
  for (const auto& [k, v] : p.shape)
    keys[k] = std::to_string(v);
  const std::vector<ops::ArgSpec> specs = op.arg_specs(p);
  std::vector<std::pair<std::string, Shape>> outs;
  const std::vector<int> idx = op.outputs(p);
  for (int o : idx)
    outs.emplace_back(dtype_name(specs.at(o).dtype), specs.at(o).shape);
  return {keys, outs, idx};
}

} // namespace

void bind_plugin_ops(nb::module_& m) {
  m.def("load_plugin", &load_plugin, nb::arg("path"),
        "Loads a plug-in; returns the names of the operators it registered.");
  m.def("describe_call", &describe_call, nb::arg("op"), nb::arg("shapes"), nb::arg("dtypes"),
        nb::arg("options"),
        "(problem keys, [(dtype, shape)] of the outputs, output indices) for a call on inputs.");
  m.def("load_env_plugins", [] {
    make_module_global();
    ops::load_env_plugins();
  });
}

} // namespace tp::py
