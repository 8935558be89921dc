// The two-kernel test operator (see TwoPassRowSum.h).
#include "TwoPassRowSum.h"

#include <mutex>

#include "tilepilot/error.h"
#include "tilepilot/lang.h"

namespace tp::test {

namespace {

using namespace tp::ops;

int64_t padded_rows(int64_t rows, int64_t br) {
  return (rows + br - 1) / br * br;
}

// Step 0: block (bx, by) sums columns [bx * bc, +bc) of rows [by * br, +br) (out-of-bounds
// columns read 0) into partials[bx * Rp + by * br + i].
Kernel partials_kernel(int64_t br, int64_t bc, int nthreads) {
  Dim R("R"), C("C"), NP("NP");
  Tensor X("x", {R, C}, f32), P("partials", {NP}, f32);
  return kernel("rowsum_partials", {X, P}, grid(ceildiv(C, bc), ceildiv(R, br)), threads(nthreads),
                [&](Var bx, Var by) {
                  Tile x = alloc_fragment({br, bc}, f32), s = alloc_fragment({br}, f32);
                  copy(X.tile(by * br, bx * bc), x);
                  reduce_sum(x, s, 1);
                  copy(s, P.tile(bx * (ceildiv(R, br) * br) + by * br));
                });
}

// Step 1: block bx adds the NP / Rp partials of rows [bx * br, +br) into y.
Kernel combine_kernel(int64_t br, int nthreads) {
  Dim R("R"), NP("NP");
  Tensor P("partials", {NP}, f32), Y("y", {R}, f32);
  return kernel("rowsum_combine", {P, Y}, grid(ceildiv(R, br)), threads(nthreads), [&](Var bx) {
    Expr rp = ceildiv(R, br) * br;
    Tile acc = alloc_fragment({br}, f32), part = alloc_fragment({br}, f32);
    clear(acc);
    serial(NP / rp, [&](Var s) {
      copy(P.tile(s * rp + bx * br), part);
      parallel({br}, [&](Var i) { acc(i) = acc(i) + part(i); });
    });
    copy(acc, Y.tile(bx * br));
  });
}

class TwoPassRowSum : public Operator {
public:
  explicit TwoPassRowSum(std::string fault = "") : fault_(std::move(fault)) {}

  std::string name() const override { return "test_two_pass_rowsum"; }
  std::string summary() const override { return "y[R] = row sums of x[R, C], in two kernels"; }
  std::vector<std::pair<std::string, std::string>> shape_keys() const override {
    return {{"R", "rows"}, {"C", "columns"}};
  }
  std::map<std::string, std::string> example_shape() const override {
    return {{"R", "40"}, {"C", "100"}};
  }
  Problem parse(const std::map<std::string, std::string>& kv, DType dtype) const override {
    Problem p;
    p.op = name();
    p.dtype = dtype;
    for (const char* k : {"R", "C"}) {
      auto it = kv.find(k);
      if (it == kv.end()) user_error() << name() << ": missing key " << k << ", e.g. R=40,C=100";
      p.shape[k] = std::stoll(it->second);
      if (p.shape[k] <= 0) user_error() << name() << ": " << k << " must be positive";
    }
    if (kv.size() != 2) user_error() << name() << ": keys are R and C";
    if (dtype != DType::f32) user_error() << name() << ": dtype must be f32";
    return p;
  }
  Problem problem_for(const std::vector<std::vector<int64_t>>& shapes, const std::vector<DType>& t,
                      const std::map<std::string, std::string>&) const override {
    if (shapes.size() != 2 || shapes[0].size() != 2 || shapes[1].size() != 1 ||
        shapes[1][0] != shapes[0][0])
      user_error() << name() << ": takes x [R, C] and y [R]";
    return parse({{"R", std::to_string(shapes[0][0])}, {"C", std::to_string(shapes[0][1])}},
                 t.at(0));
  }

  std::vector<Knob> knobs(const std::string&) const override {
    return {{"br", {16, 32}, "rows per block"},
            {"bc", {32, 64}, "columns per partial sum"},
            {"threads", {128}, "threads per block"}};
  }
  Config default_config(const Problem&, const std::string& arch) const override {
    if (arch == "cpu") return {{"br", 16}, {"bc", 32}, {"threads", 128}};
    return {{"br", 32}, {"bc", 64}, {"threads", 128}};
  }
  void validate(const Problem&, const Config&) const override {}

  Kernel build(const Problem& p, const Config& c) const override {
    return program(p, c).steps.back().kernel;
  }
  KernelProgram program(const Problem& p, const Config& c) const override {
    const int64_t br = c.at("br"), bc = c.at("bc");
    const int nthreads = static_cast<int>(c.at("threads"));
    const int64_t chunks = (p.at("C") + bc - 1) / bc;
    KernelProgram prog;
    prog.intermediates = {
        {fault_ == "dtype" ? DType::bf16 : DType::f32, {chunks * padded_rows(p.at("R"), br)}}};
    // The call's arguments are 0 (x) and 1 (y); the intermediate is 2.
    prog.steps.push_back({partials_kernel(br, bc, nthreads), {0, fault_ == "bad_index" ? 3 : 2}});
    prog.steps.push_back({combine_kernel(br, nthreads), {2, 1}});
    if (fault_ == "count") prog.steps[1].args = {2};
    if (fault_ == "no_output") prog.steps[1].args = {2, 2};
    if (fault_ == "empty") prog.steps.clear();
    return prog;
  }
  std::vector<ArgSpec> arg_specs(const Problem& p) const override {
    return {{DType::f32, {p.at("R"), p.at("C")}}, {DType::f32, {p.at("R")}}};
  }
  std::vector<int> outputs(const Problem&) const override { return {1}; }
  double flops(const Problem& p) const override {
    return static_cast<double>(p.at("R")) * p.at("C");
  }
  double min_bytes(const Problem& p) const override {
    return 4.0 * (p.at("R") * p.at("C") + p.at("R"));
  }
  int64_t reduction_length(const Problem& p) const override { return p.at("C"); }

  std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& a,
                                const Box& box) const override {
    std::vector<double> out;
    const int64_t C = p.at("C");
    for (int64_t r = box.min[0]; r < box.min[0] + box.extent[0]; ++r) {
      double s = 0;
      for (int64_t c = 0; c < C; ++c)
        s += a[0].get(r * C + c);
      out.push_back(s);
    }
    return out;
  }

  std::string framework_name() const override { return "none (a test operator)"; }
  std::unique_ptr<Framework> framework(const Problem&, const FrameworkOptions&) const override {
    user_error() << name() << " has no framework operator (a test operator)";
    return nullptr;
  }

private:
  std::string fault_;
};

} // namespace

const ops::Operator& two_pass_rowsum() {
  static std::once_flag once;
  std::call_once(once, [] { register_operator(std::make_shared<TwoPassRowSum>(), "test"); });
  return find_operator("test_two_pass_rowsum");
}

std::shared_ptr<const ops::Operator> make_two_pass_rowsum() {
  return std::make_shared<TwoPassRowSum>();
}

std::unique_ptr<ops::Operator> broken_two_pass_rowsum(const std::string& fault) {
  return std::make_unique<TwoPassRowSum>(fault);
}

} // namespace tp::test
