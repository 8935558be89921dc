// The CPU backend: NumPy float32 arrays become host tensors of the requested dtype (bf16/f16
// round to nearest even on the way in, exactly as storing them on the GPU would), the
// operator's tile-language kernel runs on the CPU interpreter, and the output comes back as
// float32 (every bf16/f16 value is exact in float32).
#include <algorithm>
#include <cstring>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "ops/HostProgram.h"
#include "ops/Operator.h"
#include "tilepilot/error.h"

namespace nb = nanobind;

namespace tp::py {

namespace {

using InArray = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using OutArray = nb::ndarray<nb::numpy, float>;

DType dtype_arg(const std::string& name) {
  auto t = parse_dtype(name);
  if (!t || !is_float(*t))
    user_error() << "dtype '" << name << "' is not supported; use f32, bf16 or f16";
  return *t;
}

HostTensor to_host(const InArray& a, DType dt) {
  std::vector<int64_t> shape(a.shape_ptr(), a.shape_ptr() + a.ndim());
  HostTensor t(dt, shape);
  const float* src = a.data();
  if (dt == DType::f32) {
    std::memcpy(t.data(), src, t.bytes());
  } else {
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, src[i]); // rounds to the dtype
  }
  return t;
}

OutArray to_numpy(const HostTensor& t) {
  auto* buf = new float[std::max<int64_t>(t.numel(), 1)];
  for (int64_t i = 0; i < t.numel(); ++i)
    buf[i] = static_cast<float>(t.get(i));
  nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return OutArray(buf, shape.size(), shape.data(), owner);
}

ops::Config config_for(const ops::Operator& op, const ops::Problem& p,
                       const std::optional<ops::Config>& given) {
  // Knobs left out come from the interpreter's default config.
  return ops::complete_config(op, p, "cpu", given ? *given : ops::Config{});
}

void interpret(const ops::KernelProgram& prog, std::vector<HostTensor*> args) {
  nb::gil_scoped_release unlocked; // the interpreter runs its own worker threads
  ops::interpret_program(prog, args);
}

/// Any registered operator on the CPU interpreter: the problem from its keys, `inputs` (float32
/// arrays, rounded into each parameter's dtype) in the operator's parameter order without the
/// outputs, and the outputs back as float32 arrays in outputs() order.
std::vector<OutArray> run_host(const std::string& op_name,
                               const std::map<std::string, std::string>& keys,
                               const std::string& dtype, const std::vector<InArray>& inputs,
                               const std::optional<ops::Config>& config) {
  const ops::Operator& op = ops::find_operator(op_name);
  const DType dt = dtype_arg(dtype);
  ops::Problem p = op.parse(keys, dt);
  const std::vector<ops::ArgSpec> specs = op.arg_specs(p);
  const std::vector<int> outs = op.outputs(p);
  std::vector<HostTensor> args;
  size_t next = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const bool is_out = std::count(outs.begin(), outs.end(), static_cast<int>(i)) > 0;
    if (is_out) {
      args.emplace_back(specs[i].dtype, specs[i].shape);
      continue;
    }
    if (next >= inputs.size())
      user_error() << op_name << ": takes " << specs.size() - outs.size() << " inputs, got "
                   << inputs.size();
    HostTensor t = to_host(inputs[next], specs[i].dtype);
    if (t.shape() != specs[i].shape) {
      std::string want, got;
      for (int64_t e : specs[i].shape)
        want += (want.empty() ? "" : ", ") + std::to_string(e);
      for (int64_t e : t.shape())
        got += (got.empty() ? "" : ", ") + std::to_string(e);
      user_error() << op_name << ": input " << next << " has shape [" << got
                   << "], the problem needs [" << want << "]";
    }
    args.push_back(std::move(t));
    ++next;
  }
  if (next != inputs.size())
    user_error() << op_name << ": takes " << next << " inputs, got " << inputs.size();
  const ops::KernelProgram prog = ops::checked_program(op, p, config_for(op, p, config));
  std::vector<HostTensor*> ptrs;
  for (HostTensor& t : args)
    ptrs.push_back(&t);
  interpret(prog, ptrs);
  std::vector<OutArray> result;
  for (int o : outs)
    result.push_back(to_numpy(args[o]));
  return result;
}

} // namespace

void bind_host_ops(nb::module_& m) {
  m.def("run_host", &run_host, nb::arg("op"), nb::arg("keys"), nb::arg("dtype"), nb::arg("inputs"),
        nb::arg("config").none(),
        "Any operator on the CPU interpreter: problem keys, float32 input arrays in parameter "
        "order; returns the outputs as float32 arrays.");
}

} // namespace tp::py
