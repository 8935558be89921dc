// The CPU backend: NumPy float32 arrays become host tensors of the requested dtype (bf16/f16
// round to nearest even on the way in, exactly as storing them on the GPU would), the
// operator's tile-language kernel runs on the CPU interpreter, and the output comes back as
// float32 (every bf16/f16 value is exact in float32).
#include <cstring>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "codegen/cpu/Interpreter.h"
#include "dispatch/Routing.h"
#include "ops/AttentionOp.h"
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
  if (!given || given->empty()) return op.default_config(p, "cpu");
  op.validate(p, *given);
  return *given;
}

void interpret(const Kernel& k, std::vector<HostTensor*> args) {
  nb::gil_scoped_release unlocked; // the interpreter runs its own worker threads
  cpu::interpret(k, args);
}

OutArray gemm_host(const InArray& a, const InArray& b, const std::string& layout,
                   const std::string& dtype, const std::optional<ops::Config>& config) {
  DType dt = dtype_arg(dtype);
  HostTensor A = to_host(a, dt), B = to_host(b, dt);
  // C's shape follows from the layout; gemm_problem then checks that all three agree.
  int64_t M = 0, N = 0;
  if (A.rank() == 2 && B.rank() == 2) {
    M = layout == "tn" ? A.shape()[1] : A.shape()[0];
    N = layout == "nt" ? B.shape()[0] : B.shape()[1];
  }
  HostTensor C(dt, {M, N});
  ops::Problem p = dispatch::gemm_problem(dt, layout, A.shape(), B.shape(), C.shape(), dt, dt);
  const ops::Operator& op = ops::find_operator("gemm");
  Kernel k = op.build(p, config_for(op, p, config));
  interpret(k, {&A, &B, &C});
  return to_numpy(C);
}

nb::object attention_host(const InArray& q, const InArray& k, const InArray& v, bool causal,
                          double scale, const std::optional<std::vector<int64_t>>& lens,
                          const std::string& dtype, const std::optional<ops::Config>& config,
                          bool return_lse) {
  DType dt = dtype_arg(dtype);
  HostTensor Q = to_host(q, dt), K = to_host(k, dt), V = to_host(v, dt);
  HostTensor O(dt, Q.shape());
  // attention_problem checks ranks and that the four shapes agree, naming each tensor.
  ops::Problem p = dispatch::attention_problem(dt, Q.shape(), K.shape(), V.shape(), O.shape(),
                                               causal, dt, dt, dt);
  const ops::Operator& op = ops::find_operator("attention");
  std::map<std::string, std::string> kv;
  for (const auto& [key, val] : p.shape)
    kv[key] = std::to_string(val);
  kv["lse"] = return_lse ? "1" : "0";
  if (lens) {
    std::string text;
    for (size_t i = 0; i < lens->size(); ++i)
      text += (i ? ":" : "") + std::to_string((*lens)[i]);
    kv["lens"] = text;
  }
  p = op.parse(kv, dt); // validates lens against B and Skv
  ops::AttentionVariant var = ops::AttentionOp::variant(p);
  var.scale = scale; // 0: 1/sqrt(D)
  ops::Config cfg = config_for(op, p, config);
  Kernel kernel = ops::attention_kernel(var, cfg);

  const int64_t B = p.at("B"), H = p.at("H"), S = p.at("S");
  HostTensor LSE(DType::f32, {B, H, S}), L(DType::i32, {B});
  std::vector<HostTensor*> args = {&Q, &K, &V, &O};
  if (var.lse) args.push_back(&LSE);
  if (var.lens) {
    for (int64_t b = 0; b < B; ++b)
      L.set(b, static_cast<double>((*lens)[b]));
    args.push_back(&L);
  }
  interpret(kernel, args);
  if (return_lse) return nb::make_tuple(to_numpy(O), to_numpy(LSE));
  return nb::cast(to_numpy(O));
}

} // namespace

void bind_host_ops(nb::module_& m) {
  m.def("gemm_host", &gemm_host, nb::arg("a"), nb::arg("b"), nb::arg("layout"), nb::arg("dtype"),
        nb::arg("config").none(),
        "C = op(A) op(B) on the CPU interpreter; float32 arrays in and out.");
  m.def("attention_host", &attention_host, nb::arg("q"), nb::arg("k"), nb::arg("v"),
        nb::arg("causal"), nb::arg("scale"), nb::arg("lens").none(), nb::arg("dtype"),
        nb::arg("config").none(), nb::arg("return_lse"),
        "O (and LSE) of attention forward on the CPU interpreter; float32 arrays in and out.");
}

} // namespace tp::py
