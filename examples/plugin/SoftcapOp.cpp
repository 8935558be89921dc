// `softcap`: logit soft-capping, y = cap * tanh(x / cap), as Gemma 2 applies it to its final
// logits [T, V] (cap 30). Eager PyTorch runs it as three element-wise kernels (divide, tanh,
// multiply), each reading and writing the whole [T, V] tensor; the fused kernel reads x once
// and writes y once. Written against the public headers only, as a user's plug-in would be.
#include <cmath>
#include <string>

#include <tilepilot/plugin.h>
#include <tilepilot/tilepilot.h>

using namespace tp;

namespace {

double cap_of(const ops::Problem& p) {
  auto it = p.options.find("cap");
  return it == p.options.end() ? 30.0 : std::stod(it->second);
}

// The fused kernel: one bm x bn tile per block, the arithmetic in f32, one rounding on store.
Kernel softcap_kernel(DType dtype, double cap, int64_t bm, int64_t bn, int threads_) {
  Dim T("T"), V("V");
  Tensor X("x", {T, V}, dtype), Y("y", {T, V}, dtype);
  return kernel("softcap", {X, Y}, grid(ceildiv(V, bn), ceildiv(T, bm)), threads(threads_),
                [&](Var bx, Var by) {
                  Tile x = alloc_fragment({bm, bn}, dtype), y = alloc_fragment({bm, bn}, dtype);
                  copy(X.tile(by * bm, bx * bn), x);
                  parallel({bm, bn}, [&](Var i, Var j) {
                    y(i, j) = tanh(cast(f32, x(i, j)) * (1.0 / cap)) * cap;
                  });
                  copy(y, Y.tile(by * bm, bx * bn));
                });
}

// One step of eager PyTorch: out = f(in) element-wise, rounded to the dtype (as each torch op
// stores its result). The framework operator runs three of them.
Kernel eager_step(DType dtype, int step, double cap) {
  Dim N("N");
  Tensor In("in", {N}, dtype), Out("out", {N}, dtype);
  const int64_t bn = 1024;
  return kernel("softcap_eager_" + std::to_string(step), {In, Out}, grid(ceildiv(N, bn)),
                threads(256), [&](Var bx) {
                  Tile a = alloc_fragment({bn}, dtype), b = alloc_fragment({bn}, dtype);
                  copy(In.tile(bx * bn), a);
                  parallel({bn}, [&](Var i) {
                    Expr v = cast(f32, a(i));
                    b(i) = step == 0 ? v * (1.0 / cap) : step == 1 ? tanh(v) : v * cap;
                  });
                  copy(b, Out.tile(bx * bn));
                });
}

class EagerSoftcap : public ops::Framework {
public:
  explicit EagerSoftcap(const ops::Problem& p)
      : n_(p.at("T") * p.at("V")), dtype_(p.dtype), tmp_(p.dtype, {n_}) {
    for (int s = 0; s < 3; ++s)
      steps_.push_back(compile(eager_step(p.dtype, s, cap_of(p))));
  }
  std::string name() const override { return "eager PyTorch (x / cap, tanh, * cap)"; }
  void run(const std::vector<DeviceTensor>& a, Stream s) override {
    DeviceTensor x(a.at(0).ptr, dtype_, {n_}), y(a.at(1).ptr, dtype_, {n_});
    steps_[0].launch({x, tmp_}, s);
    steps_[1].launch({tmp_, y}, s);
    steps_[2].launch({y, y}, s); // in place, as torch's mul_ would
  }

private:
  int64_t n_;
  DType dtype_;
  DeviceArray tmp_;
  std::vector<CompiledKernel> steps_;
};

class SoftcapOp : public ops::Operator {
public:
  std::string name() const override { return "softcap"; }
  std::string summary() const override {
    return "y[T,V] = cap * tanh(x / cap) (Gemma 2 logit soft-capping); example plug-in";
  }
  std::vector<std::pair<std::string, std::string>> shape_keys() const override {
    return {{"T", "tokens (rows)"}, {"V", "vocabulary (columns)"}, {"cap", "the cap (default 30)"}};
  }
  std::map<std::string, std::string> example_shape() const override {
    return {{"T", "128"}, {"V", "1024"}};
  }
  ops::Problem parse(const std::map<std::string, std::string>& kv, DType dtype) const override {
    ops::Problem p;
    p.op = name();
    p.dtype = dtype;
    for (const auto& [k, v] : kv)
      if (k != "T" && k != "V" && k != "cap")
        user_error() << "softcap: unknown key '" << k << "'; keys are T, V, cap";
    for (const char* k : {"T", "V"}) {
      auto it = kv.find(k);
      long long v = 0;
      try {
        size_t pos = 0;
        if (it != kv.end()) v = std::stoll(it->second, &pos);
        if (it != kv.end() && pos != it->second.size()) v = 0;
      } catch (const std::exception&) {}
      if (v <= 0 || v > (1ll << 31))
        user_error() << "softcap: " << k << " must be a positive integer below 2^31, e.g. "
                     << "T=4096,V=256000";
      p.shape[k] = v;
    }
    if (auto it = kv.find("cap"); it != kv.end()) {
      double c = -1;
      try {
        c = std::stod(it->second);
      } catch (const std::exception&) {}
      if (!(c > 0) || !std::isfinite(c))
        user_error() << "softcap: cap=" << it->second << " must be a positive number";
      p.options["cap"] = it->second;
    }
    if (dtype != DType::bf16 && dtype != DType::f16 && dtype != DType::f32)
      user_error() << "softcap: dtype " << dtype_name(dtype) << " is not supported; use bf16, "
                   << "f16 or f32";
    return p;
  }
  ops::Problem problem_for(const std::vector<std::vector<int64_t>>& shapes,
                           const std::vector<DType>& dtypes,
                           const std::map<std::string, std::string>& options) const override {
    if (shapes.size() != 2 || shapes[0].size() != 2 || shapes[0] != shapes[1] ||
        dtypes[0] != dtypes[1])
      user_error() << "softcap: takes x and y of one 2-d shape [T, V] and one dtype";
    std::map<std::string, std::string> kv = options;
    kv["T"] = std::to_string(shapes[0][0]);
    kv["V"] = std::to_string(shapes[0][1]);
    return parse(kv, dtypes[0]);
  }

  ops::Problem
  problem_from_inputs(const std::vector<std::vector<int64_t>>& shapes,
                      const std::vector<DType>& dtypes,
                      const std::map<std::string, std::string>& options) const override {
    if (shapes.size() != 1 || shapes[0].size() != 2)
      user_error() << "softcap: takes one 2-d input x [T, V]";
    std::map<std::string, std::string> kv = options;
    kv["T"] = std::to_string(shapes[0][0]);
    kv["V"] = std::to_string(shapes[0][1]);
    return parse(kv, dtypes[0]);
  }

  std::vector<ops::Knob> knobs(const std::string&) const override {
    return {{"bm", {1, 2, 4, 8}, "rows per block", 1, 64},
            {"bn", {256, 512, 1024, 2048}, "columns per block", 32, 8192},
            {"threads", {128, 256}, "threads per block (a multiple of 32)", 32, 1024, 0, 32}};
  }
  ops::Config default_config(const ops::Problem&, const std::string& arch) const override {
    if (arch == "cpu") return {{"bm", 2}, {"bn", 256}, {"threads", 128}};
    return {{"bm", 4}, {"bn", 1024}, {"threads", 256}};
  }
  // Each knob's domain is its Knob (tilepilot checks configs with ops::check_config before any
  // call here); softcap has no rule between knobs.
  void validate(const ops::Problem&, const ops::Config&) const override {}

  Kernel build(const ops::Problem& p, const ops::Config& c) const override {
    return softcap_kernel(p.dtype, cap_of(p), c.at("bm"), c.at("bn"),
                          static_cast<int>(c.at("threads")));
  }
  std::vector<ops::ArgSpec> arg_specs(const ops::Problem& p) const override {
    return {{p.dtype, {p.at("T"), p.at("V")}}, {p.dtype, {p.at("T"), p.at("V")}}};
  }
  std::vector<HostTensor> make_args(const ops::Problem& p, uint64_t seed) const override {
    // Logits span well past the cap, so that tanh saturates on part of the input.
    std::vector<HostTensor> a;
    a.emplace_back(p.dtype, std::vector<int64_t>{p.at("T"), p.at("V")});
    a.emplace_back(p.dtype, std::vector<int64_t>{p.at("T"), p.at("V")});
    a[0].fill_random(seed * 2 + 1, -3 * cap_of(p), 3 * cap_of(p));
    a[1].poison();
    return a;
  }
  std::vector<int> outputs(const ops::Problem&) const override { return {1}; }
  // block_outputs: the default reads them from the kernel's copy into `out`.
  double flops(const ops::Problem& p) const override { return 3.0 * p.at("T") * p.at("V"); }
  double min_bytes(const ops::Problem& p) const override {
    return 2.0 * p.at("T") * p.at("V") * dtype_bytes(p.dtype);
  }
  std::vector<double> reference(const ops::Problem& p, const std::vector<HostTensor>& a,
                                const ops::Box& box) const override {
    const double cap = cap_of(p);
    std::vector<double> out;
    for (int64_t r = 0; r < box.extent[0]; ++r)
      for (int64_t c = 0; c < box.extent[1]; ++c)
        out.push_back(cap *
                      std::tanh(a[0].get((box.min[0] + r) * p.at("V") + box.min[1] + c) / cap));
    return out;
  }
  std::pair<double, double> tolerance(DType t) const override {
    // The output is at most `cap` in magnitude; one rounding of it in bf16 is 2^-8 relative,
    // and tanh in f32 adds a few ulps of f32.
    if (t == DType::f32) return {1e-5, 1e-5};
    return {t == DType::bf16 ? 2e-2 : 4e-3, t == DType::bf16 ? 1.6e-2 : 2e-3};
  }
  std::string framework_name() const override { return "eager PyTorch (x / cap, tanh, * cap)"; }
  std::unique_ptr<ops::Framework> framework(const ops::Problem& p,
                                            const ops::FrameworkOptions&) const override {
    if (!gpu_available())
      user_error() << "softcap: the framework operator runs on a GPU, and there is none here";
    return std::make_unique<EagerSoftcap>(p);
  }
};

} // namespace

TILEPILOT_PLUGIN(registry) {
  registry.add(std::make_shared<SoftcapOp>());
}
