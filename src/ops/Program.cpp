// Kernel programs (tilepilot/operator.h): the default one-step program, what a step's
// parameters are bound to, and the one check of a program an operator returns.
#include <string>

#include "ir/ArgBinding.h"
#include "ops/Operator.h"
#include "ops/ParseHelpers.h"

namespace tp::ops {

namespace {

/// What binding `b` of a program is, for messages: "argument 2" or "intermediate 0".
std::string binding_text(int b, size_t n) {
  return b < static_cast<int>(n) ? "argument " + std::to_string(b)
                                 : "intermediate " + std::to_string(b - static_cast<int>(n));
}

/// A UserError's message without the "error: " its text starts with, to embed in another.
std::string bare(const UserError& e) {
  std::string s = e.what();
  const size_t at = s.find("error: ");
  return at == std::string::npos ? s : s.substr(at + 7);
}

} // namespace

KernelProgram Operator::program(const Problem& p, const Config& c) const {
  KernelProgram prog;
  KernelStep step{build(p, c), {}};
  const size_t n = arg_specs(p).size();
  for (size_t i = 0; i < n; ++i)
    step.args.push_back(static_cast<int>(i));
  prog.steps.push_back(std::move(step));
  return prog;
}

std::vector<ArgSpec> step_arg_specs(const KernelProgram& prog, size_t s,
                                    const std::vector<ArgSpec>& call) {
  std::vector<ArgSpec> out;
  for (int b : prog.steps.at(s).args)
    out.push_back(b < static_cast<int>(call.size()) ? call.at(b)
                                                    : prog.intermediates.at(b - call.size()));
  return out;
}

void validate_program(const Operator& op, const Problem& p, const KernelProgram& prog) {
  const std::vector<ArgSpec> call = op.arg_specs(p);
  const size_t n = call.size(), total = n + prog.intermediates.size();
  if (prog.steps.empty())
    user_error() << op.name() << ": Operator::program returned no steps; a program runs at "
                 << "least one kernel";
  for (size_t s = 0; s < prog.steps.size(); ++s) {
    const KernelStep& step = prog.steps[s];
    const std::string where = op.name() + ": program step " + std::to_string(s) +
                              (step.kernel.defined() ? " (" + step.kernel->name + ")" : "");
    if (!step.kernel.defined())
      user_error() << where << " has no kernel; give every KernelStep a built kernel";
    const ir::KernelNode& k = step.kernel.node();
    if (!k.scalars.empty())
      user_error() << where << " takes " << k.scalars.size() << " scalar parameter(s); a "
                   << "program binds tensors only, so pass the value as a tensor or a constant";
    if (k.params.size() != step.args.size())
      user_error() << where << ": the kernel has " << k.params.size()
                   << " tensor parameters but the step binds " << step.args.size()
                   << "; give KernelStep::args one entry per parameter";
    for (size_t i = 0; i < step.args.size(); ++i) {
      const int b = step.args[i];
      if (b < 0 || b >= static_cast<int>(total))
        user_error() << where << ": parameter " << i << " (" << k.params[i]->name
                     << ") is bound to " << b << ", outside [0, " << total << "): 0.." << n - 1
                     << " are the call's arguments, " << n << ".." << total - 1
                     << " its intermediates";
      const ArgSpec& spec = b < static_cast<int>(n) ? call[b] : prog.intermediates[b - n];
      const ir::BufferNode& param = *k.params[i];
      const std::string what = "parameter " + std::to_string(i) + " (" + param.name + ", " +
                               dtype_name(param.dtype) + " rank " + std::to_string(param.rank()) +
                               ") is bound to " + binding_text(b, n) + " (" +
                               dtype_name(spec.dtype) + " " + shape_text(spec.shape) + ")";
      if (param.dtype != spec.dtype || param.rank() != static_cast<int>(spec.shape.size()))
        user_error() << where << ": " << what << "; the dtypes and ranks must agree";
      // A strided view reaches every kernel its argument is bound to.
      if (b < static_cast<int>(n) && op.strided_arg(p, static_cast<size_t>(b)) &&
          param.strides.empty())
        user_error() << where << ": " << what << ", which Operator::strided_arg says may be a "
                     << "strided view, but the parameter is contiguous; declare it "
                     << "Tensor(name, shape, dtype, tp::strided)";
      for (int d = 0; d < param.rank(); ++d)
        if (const auto* imm = ir::as<ir::IntImm>(param.shape[d]);
            imm && imm->value != spec.shape[d])
          user_error() << where << ": " << what << ", but its extent " << d << " is " << imm->value;
    }
    // The Dims must bind consistently (one Dim, one size) over the bound shapes.
    std::vector<ir::ArgDesc> descs;
    for (const ArgSpec& a : step_arg_specs(prog, s, call))
      descs.push_back({a.dtype, a.shape});
    try {
      ir::bind_args(k, descs);
    } catch (const UserError& e) {
      user_error() << where << ": its parameters do not fit what they are bound to: " << bare(e);
    }
  }
  const KernelStep& last = prog.steps.back();
  for (int o : op.outputs(p)) {
    bool taken = false;
    for (int b : last.args)
      taken = taken || b == o;
    if (!taken)
      user_error() << op.name() << ": the program's last step (" << last.kernel->name
                   << ") does not take output argument " << o << "; the last step writes the "
                   << "outputs (checks and block_outputs read them from it)";
  }
}

KernelProgram checked_program(const Operator& op, const Problem& p, const Config& c) {
  KernelProgram prog = op.program(p, c);
  validate_program(op, p, prog);
  return prog;
}

} // namespace tp::ops
