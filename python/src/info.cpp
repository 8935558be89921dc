// check, ops, env: the same JSON the CLI prints (`tilepilot check --json`, `ops --json`,
// `env --json`), returned as text that the Python side parses, so both stay one contract.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nlohmann/json.hpp>

#include "bindings.h"
#include "ops/Catalog.h"
#include "ops/Check.h"
#include "ops/CudaCheck.h"
#include "runtime/Environment.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace nb = nanobind;

namespace tp::py {

namespace {

std::string check_json(const std::string& op_name, const std::map<std::string, std::string>& shape,
                       const std::string& dtype, const std::string& backend, uint64_t seed,
                       const std::optional<ops::Config>& config, double atol, double rtol) {
  const ops::Operator& op = ops::find_operator(op_name);
  auto dt = parse_dtype(dtype);
  if (!dt) user_error() << "dtype '" << dtype << "' is not known; use bf16, f16 or f32";
  if (backend != "cpu" && backend != "cuda")
    user_error() << "backend '" << backend
                 << "' is not known; use cpu (the reference interpreter) or cuda (an NVIDIA GPU)";
  ops::Problem p = op.parse(shape, *dt);
  ops::CheckOptions o;
  o.backend = backend;
  o.arch = backend == "cpu" ? "cpu" : "sm_90a"; // as the CLI: picks the default config
  o.seed = seed;
  o.atol = atol;
  o.rtol = rtol;
  if (config && !config->empty()) o.config = ops::complete_config(op, p, o.arch, *config);
  ops::CheckResult r;
  {
    nb::gil_scoped_release unlocked;
    r = backend == "cuda" ? ops::check_cuda(op, p, o) : ops::check(op, p, o);
  }
  return ops::to_json(r).dump();
}

std::string ops_json() {
  return ops::catalog_json().dump();
}

std::string env_json() {
  return rt::to_env_json(rt::capture_environment()).dump();
}

} // namespace

void bind_info(nb::module_& m) {
  m.def("check_json", &check_json, nb::arg("op"), nb::arg("shape"), nb::arg("dtype"),
        nb::arg("backend"), nb::arg("seed"), nb::arg("config").none(), nb::arg("atol"),
        nb::arg("rtol"));
  m.def("ops_json", &ops_json);
  m.def("env_json", &env_json);
}

} // namespace tp::py
