// Test-only fault injection: an operator wrapper whose kernels are deliberately wrong.
#include "pilot/FaultyOperator.h"

#include "ir/IRVisitor.h"

namespace tp::pilot {

namespace {

constexpr double kWrongScale = 1.25;

/// Before each fragment -> global copy (an epilogue store), scales the fragment in place.
class ScaleEpilogues : public ir::IRMutator {
protected:
  using ir::IRMutator::visit;
  ir::Stmt visit(const ir::Copy* op, const ir::Stmt& self) override {
    const ir::Buffer& src = op->src.buffer;
    if (src->scope != ir::Scope::fragment || op->dst.buffer->scope != ir::Scope::global)
      return self;
    std::vector<Var> vars;
    std::vector<Expr> idx;
    for (int d = 0; d < src->rank(); ++d) {
      vars.push_back(ir::Variable::make("fault_i" + std::to_string(d)));
      idx.push_back(vars.back());
    }
    Expr scaled =
        ir::Binary::make(ir::BinOp::mul, ir::Load::make(src, idx), ir::FloatImm::make(kWrongScale));
    ir::Stmt body = ir::Store::make(src, idx, scaled, op->loc);
    ir::Stmt scale = ir::Parallel::make(vars, src->const_shape(), body, op->loc);
    return ir::Seq::make({scale, self}, op->loc);
  }
};

class FaultyOperator : public ops::Operator {
public:
  FaultyOperator(const ops::Operator& base, std::string fault)
      : base_(base), fault_(std::move(fault)) {}
  std::string name() const override { return base_.name(); }
  std::string summary() const override { return base_.summary() + " [fault: " + fault_ + "]"; }
  std::vector<std::pair<std::string, std::string>> shape_keys() const override {
    return base_.shape_keys();
  }
  std::vector<ops::Knob> knobs(const std::string& arch) const override { return base_.knobs(arch); }
  ops::Problem problem_for(const std::vector<std::vector<int64_t>>& shapes,
                           const std::vector<DType>& dtypes,
                           const std::map<std::string, std::string>& options) const override {
    return base_.problem_for(shapes, dtypes, options);
  }
  ops::Problem
  problem_from_inputs(const std::vector<std::vector<int64_t>>& shapes,
                      const std::vector<DType>& dtypes,
                      const std::map<std::string, std::string>& options) const override {
    return base_.problem_from_inputs(shapes, dtypes, options);
  }
  std::map<std::string, std::string> example_shape() const override {
    return base_.example_shape();
  }
  std::string variant_label(const ops::Problem& p) const override { return base_.variant_label(p); }
  std::vector<ops::ArgSpec> arg_specs(const ops::Problem& p) const override {
    return base_.arg_specs(p);
  }
  bool gpu_reference(const ops::Problem& p, const std::vector<DeviceTensor>& a,
                     const std::vector<DeviceTensor>& out, Stream s) const override {
    return base_.gpu_reference(p, a, out, s);
  }
  std::string framework_name() const override { return base_.framework_name(); }
  std::unique_ptr<ops::Framework> framework(const ops::Problem& p,
                                            const ops::FrameworkOptions& o) const override {
    return base_.framework(p, o);
  }
  void run_host_framework(const ops::Problem& p, std::vector<HostTensor>& args) const override {
    base_.run_host_framework(p, args);
  }
  std::set<std::string> exact_keys() const override { return base_.exact_keys(); }
  ops::Problem tuning_problem(const ops::Problem& p) const override {
    return base_.tuning_problem(p);
  }
  ops::Estimate estimate(const ops::Problem& p, const ops::Config& c,
                         const std::string& arch) const override {
    return base_.estimate(p, c, arch);
  }
  double score(const ops::Problem& p, const ops::Config& c, int sm_count) const override {
    return base_.score(p, c, sm_count);
  }
  ops::Problem parse(const std::map<std::string, std::string>& kv, DType t) const override {
    return base_.parse(kv, t);
  }
  ops::Config default_config(const ops::Problem& p, const std::string& arch) const override {
    return base_.default_config(p, arch);
  }
  void validate(const ops::Problem& p, const ops::Config& c) const override {
    base_.validate(p, c);
  }
  Kernel build(const ops::Problem& p, const ops::Config& c) const override {
    return inject_fault(base_.build(p, c), fault_);
  }
  /// The base's program with the fault in its last step, the one that writes the outputs.
  ops::KernelProgram program(const ops::Problem& p, const ops::Config& c) const override {
    ops::KernelProgram prog = base_.program(p, c);
    if (!prog.steps.empty())
      prog.steps.back().kernel = inject_fault(prog.steps.back().kernel, fault_);
    return prog;
  }
  std::vector<HostTensor> make_args(const ops::Problem& p, uint64_t seed) const override {
    return base_.make_args(p, seed);
  }
  std::vector<int> outputs(const ops::Problem& p) const override { return base_.outputs(p); }
  std::vector<double> reference(const ops::Problem& p, const std::vector<HostTensor>& args,
                                const ops::Box& box) const override {
    return base_.reference(p, args, box);
  }
  std::vector<ops::Box> block_outputs(const ops::Problem& p, const ops::Config& c,
                                      const std::array<int64_t, 3>& b) const override {
    return base_.block_outputs(p, c, b);
  }
  std::array<int64_t, 3> grid(const ops::Problem& p, const ops::Config& c) const override {
    return base_.grid(p, c);
  }
  double flops(const ops::Problem& p) const override { return base_.flops(p); }
  double min_bytes(const ops::Problem& p) const override { return base_.min_bytes(p); }
  std::pair<double, double> tolerance(DType t) const override { return base_.tolerance(t); }
  std::string unsupported_on(const ops::Problem& p, const std::string& arch) const override {
    return base_.unsupported_on(p, arch);
  }
  int64_t reduction_length(const ops::Problem& p) const override {
    return base_.reduction_length(p);
  }

private:
  const ops::Operator& base_;
  std::string fault_;
};

} // namespace

Kernel inject_fault(const Kernel& k, const std::string& fault) {
  if (fault != "wrong_scale")
    user_error() << "unknown fault '" << fault << "'; the test-only faults are: wrong_scale";
  auto node = std::make_shared<ir::KernelNode>(k.node());
  node->name += "_fault_" + fault;
  node->body = ScaleEpilogues().mutate(node->body);
  return Kernel(node);
}

std::shared_ptr<const ops::Operator> with_fault(const ops::Operator& base,
                                                const std::string& fault) {
  if (fault.empty())
    return std::shared_ptr<const ops::Operator>(&base, [](const ops::Operator*) {});
  if (fault != "wrong_scale")
    user_error() << "unknown fault '" << fault << "'; the test-only faults are: wrong_scale";
  return std::make_shared<FaultyOperator>(base, fault);
}

} // namespace tp::pilot
