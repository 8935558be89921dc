// The Operator interface's shared parts: problems, knob checks, the default implementations
// every operator may rely on (grid from the kernel, host framework from the fp64 reference,
// estimates from the compiler's own plan) and key=value parsing.
#include "ops/Operator.h"
#include "compile/Lower.h"

#include <algorithm>
#include <sstream>

#include "codegen/cuda/LoweredKernel.h"
#include "ir/ArgBinding.h"
#include "ops/OutputBoxes.h"

namespace tp::ops {

int64_t Problem::at(const std::string& k) const {
  auto it = shape.find(k);
  internal_assert(it != shape.end()) << op << " problem has no key " << k;
  return it->second;
}

int64_t Problem::get(const std::string& k, int64_t dflt) const {
  auto it = shape.find(k);
  return it == shape.end() ? dflt : it->second;
}

std::string Problem::shape_str() const {
  std::string s;
  for (const auto& [k, v] : shape)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  for (const auto& [k, v] : options)
    s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

bool Knob::accepts(int64_t v) const {
  if (min == 0 && max == 0) return std::find(values.begin(), values.end(), v) != values.end();
  return v >= min && v <= max && (multiple <= 1 || v % multiple == 0);
}

void validate_knobs(const Operator& op, const Config& c, const std::string& arch) {
  const std::vector<Knob> ks = op.knobs(arch);
  for (const auto& [k, v] : c) {
    auto it = std::find_if(ks.begin(), ks.end(), [&](const Knob& x) { return x.name == k; });
    if (it == ks.end()) {
      std::string known;
      for (const Knob& x : ks)
        known += (known.empty() ? "" : ", ") + x.name;
      user_error() << op.name() << ": unknown config knob '" << k << "'"
                   << (arch == "cpu" ? "" : " on " + arch) << "; the knobs are " << known
                   << " (see `tilepilot ops`)";
    }
    if (!it->accepts(v)) {
      std::ostringstream range;
      if (it->min == 0 && it->max == 0) {
        for (size_t i = 0; i < it->values.size(); ++i)
          range << (i ? ", " : "") << it->values[i];
        range << " (one of these)";
      } else {
        range << (it->multiple > 1 ? "a multiple of " + std::to_string(it->multiple) + " in " : "")
              << "[" << it->min << ", " << it->max << "]";
      }
      // A value some other arch takes is "not available" here, rather than out of range.
      bool elsewhere = false;
      if (arch != "cpu")
        for (const Knob& x : op.knobs("cpu"))
          if (x.name == k && x.accepts(v)) elsewhere = true;
      if (elsewhere)
        user_error() << op.name() << ": config " << k << "=" << v << " is not available on " << arch
                     << "; there " << k << " takes " << range.str() << ": " << it->help;
      user_error() << op.name() << ": config " << k << "=" << v << " is out of range"
                   << (arch == "cpu" ? "" : " on " + arch) << "; " << k << " takes " << range.str()
                   << ": " << it->help;
    }
  }
}

void check_config(const Operator& op, const Problem& p, const Config& c, const std::string& arch) {
  validate_knobs(op, c, arch);
  for (const Knob& k : op.knobs(arch))
    if (k.required() && !c.count(k.name))
      user_error() << op.name() << ": config " << (c.empty() ? "{}" : config_str(c))
                   << " is missing " << k.name << " (" << k.help << "); set it, or give only "
                   << "the knobs to change and let the default config fill the rest";
  op.validate(p, c);
}

Config complete_config(const Operator& op, const Problem& p, const std::string& arch,
                       const Config& given) {
  Config c = op.default_config(p, arch);
  for (const auto& [k, v] : given)
    c[k] = v;
  check_config(op, p, c, arch);
  return c;
}

std::pair<double, double> Operator::tolerance(DType t) const {
  switch (t) {
  case DType::bf16:
    return {2e-2, 2e-2};
  case DType::f16:
    return {1e-2, 1e-2};
  default:
    return {1e-4, 1e-4};
  }
}

Problem Operator::problem_for(const std::vector<std::vector<int64_t>>&, const std::vector<DType>&,
                              const std::map<std::string, std::string>&) const {
  user_error() << name() << " cannot be called on tensors: the operator does not say how its "
               << "tensors' shapes make a problem (Operator::problem_for)";
  return {};
}

Problem Operator::problem_from_inputs(const std::vector<std::vector<int64_t>>&,
                                      const std::vector<DType>&,
                                      const std::map<std::string, std::string>&) const {
  user_error() << name() << " cannot be called on input tensors alone: the operator does not "
               << "say how its inputs' shapes make a problem (Operator::problem_from_inputs)";
  return {};
}

std::vector<HostTensor> Operator::make_args(const Problem& p, uint64_t seed) const {
  std::vector<HostTensor> args;
  const std::vector<int> outs = outputs(p);
  const std::vector<ArgSpec> specs = arg_specs(p);
  for (size_t i = 0; i < specs.size(); ++i) {
    HostTensor t(specs[i].dtype, specs[i].shape);
    if (std::count(outs.begin(), outs.end(), static_cast<int>(i)))
      t.poison();
    else
      t.fill_random(seed * (specs.size() + 1) + i + 1);
    args.push_back(std::move(t));
  }
  return args;
}

std::array<int64_t, 3> Operator::grid(const Problem& p, const Config& c) const {
  const KernelProgram prog = checked_program(*this, p, c);
  const size_t last = prog.steps.size() - 1;
  const Kernel& k = prog.steps.at(last).kernel;
  std::vector<ir::ArgDesc> descs;
  for (const ArgSpec& s : step_arg_specs(prog, last, arg_specs(p)))
    descs.push_back({s.dtype, s.shape});
  ir::Binding env = ir::bind_args(k.node(), descs);
  std::array<int64_t, 3> g{1, 1, 1};
  for (size_t i = 0; i < k->grid.size() && i < 3; ++i)
    g[i] = ir::eval_int(k->grid[i], env);
  return g;
}

std::vector<Box> Operator::block_outputs(const Problem& p, const Config& c,
                                         const std::array<int64_t, 3>& block) const {
  // Check asks for a handful of blocks of one program in a row: keep the last one built.
  thread_local std::string last_key;
  thread_local KernelProgram last;
  const std::string key =
      name() + "|" + p.shape_str() + "|" + dtype_name(p.dtype) + "|" + config_str(c);
  if (key != last_key || last.steps.empty()) {
    last = checked_program(*this, p, c);
    last_key = key;
  }
  // The last step writes the outputs: its parameters bound to them, mapped back to the call's
  // argument indices afterwards.
  const size_t s = last.steps.size() - 1;
  const KernelStep& step = last.steps.at(s);
  std::vector<int> params;
  for (int o : outputs(p))
    for (size_t i = 0; i < step.args.size(); ++i)
      if (step.args[i] == o) params.push_back(static_cast<int>(i));
  std::optional<std::vector<Box>> boxes =
      output_boxes(step.kernel, step_arg_specs(last, s, arg_specs(p)), params, block);
  if (!boxes)
    user_error() << name() << ": which output elements a block writes cannot be read from the "
                 << "kernel (a write's position depends on loaded data or is not a box); "
                 << "override Operator::block_outputs to say it";
  for (Box& b : *boxes)
    b.tensor = step.args.at(b.tensor);
  return *boxes;
}

void Operator::run_host_framework(const Problem& p, std::vector<HostTensor>& args) const {
  // Every output element lies in the box of exactly one block, so the blocks' boxes of any
  // config cover the outputs; the interpreter's default config is valid for every problem.
  const Config c = default_config(p, "cpu");
  const std::array<int64_t, 3> g = grid(p, c);
  for (int64_t z = 0; z < g[2]; ++z)
    for (int64_t y = 0; y < g[1]; ++y)
      for (int64_t x = 0; x < g[0]; ++x)
        for (const Box& box : block_outputs(p, c, {x, y, z})) {
          std::vector<double> ref = reference(p, args, box);
          HostTensor& out = args.at(box.tensor);
          const std::vector<int64_t>& shape = out.shape();
          const size_t rank = shape.size();
          std::vector<int64_t> idx(rank, 0);
          for (size_t i = 0; i < ref.size(); ++i) {
            // idx walks the box row-major; the flat index is the tensor's row-major offset.
            int64_t flat = 0;
            for (size_t d = 0; d < rank; ++d)
              flat = flat * shape[d] + box.min[d] + idx[d];
            out.set(flat, ref[i]);
            for (size_t d = rank; d-- > 0;) {
              if (++idx[d] < box.extent[d]) break;
              idx[d] = 0;
            }
          }
        }
}

Estimate Operator::estimate(const Problem& p, const Config& c, const std::string& arch) const {
  // The compiler's own plan (its passes up to tile-op lowering): no NVRTC, no GPU. Registers are
  // left to the ptxas report after compiling. Steps run one after another, so the largest step
  // bounds.
  passes::Target t = passes::Target::parse(arch);
  t.enforce_smem_limit = false; // the tuner compares the plan with the device's limit
  Estimate e;
  const KernelProgram prog = checked_program(*this, p, c);
  const std::vector<ArgSpec> call = arg_specs(p);
  for (size_t s = 0; s < prog.steps.size(); ++s) {
    // The variant this step launches for the problem's shapes (no TMA for unaligned rows).
    std::vector<ir::ArgDesc> descs;
    for (const ArgSpec& a : step_arg_specs(prog, s, call))
      descs.push_back({a.dtype, a.shape});
    // A kernel that asks for more blocks per SM is held to its share by the plan itself.
    const cuda::LaunchResources r = cuda::plan_for_shapes(prog.steps[s].kernel, t, descs);
    e.smem_bytes = std::max<int64_t>(e.smem_bytes, r.smem_bytes);
    e.block_threads = std::max<int64_t>(e.block_threads, r.block_threads);
  }
  return e;
}

std::map<std::string, std::string> parse_kv(const std::string& text, const char* what) {
  std::map<std::string, std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      // The example fits the flag: shape keys only for --shape.
      std::string w = what, example = w == "--shape"    ? "M=128,N=256,K=64"
                                      : w == "--config" ? "bm=128,bn=128,stages=3"
                                      : w == "--space"  ? "bm=64|128,stages=3|4"
                                      : w == "--set"    ? "layers=2,hidden=2048"
                                                        : "key=value,key=value";
      user_error() << "malformed " << what << " '" << text << "': '" << item << "' is not key=value"
                   << (eq + 1 == item.size() ? " (the value is missing)" : "") << "; write e.g. "
                   << w << " " << example;
    }
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (out.count(k)) user_error() << "malformed " << what << ": key '" << k << "' given twice";
    out[k] = v;
  }
  return out;
}

int64_t parse_knob_value(const std::string& knob, const std::string& text,
                         const std::string& where) {
  size_t pos = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &pos);
  } catch (const std::exception&) {}
  if (text.empty() || pos != text.size() || v < 0)
    user_error() << where << ": " << knob << "=" << text << ": '" << text
                 << "' is not a non-negative integer; write e.g. " << knob
                 << (where == "--space" ? "=64|128" : "=128");
  return v;
}

Config parse_config(const std::string& text) {
  Config c;
  for (const auto& [k, v] : parse_kv(text, "--config"))
    c[k] = parse_knob_value(k, v, "--config");
  return c;
}

Problem parse_problem(const std::string& op, const std::map<std::string, std::string>& kv,
                      DType dtype) {
  return find_operator(op).parse(kv, dtype);
}

std::string config_str(const Config& c) {
  std::string s;
  for (const auto& [k, v] : c)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

} // namespace tp::ops
