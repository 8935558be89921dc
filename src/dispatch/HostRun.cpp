// Host execution of dispatched calls.
#include "dispatch/HostRun.h"

#include "codegen/cpu/Interpreter.h"

namespace tp::dispatch {

void run_interpreter(const Kernel& k, const std::vector<const HostTensor*>& inputs,
                     HostTensor& out) {
  // The interpreter takes mutable pointers because any parameter may be written; the kernels
  // dispatched here write only their output, so the inputs stay as the caller gave them.
  std::vector<HostTensor*> args;
  for (const HostTensor* t : inputs)
    args.push_back(const_cast<HostTensor*>(t));
  args.push_back(&out);
  cpu::interpret(k, args);
}

void run_host_reference(const ops::Problem& p, const std::vector<const HostTensor*>& inputs,
                        HostTensor& out) {
  const ops::Operator& op = ops::find_operator(p.op);
  // The references read the operator's argument list (inputs, then the output slot).
  std::vector<HostTensor> args;
  for (const HostTensor* t : inputs)
    args.push_back(*t);
  args.emplace_back(out.dtype(), out.shape());
  const int o = static_cast<int>(inputs.size());
  if (p.op == "gemm") {
    std::vector<double> ref = op.reference(p, args, ops::Box{o, {0, 0}, {p.at("M"), p.at("N")}});
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set(i, ref[i]);
    return;
  }
  // Attention's reference works on one (batch, head) box at a time.
  const int64_t B = p.at("B"), H = p.at("H"), S = p.at("S"), D = p.at("D");
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> ref = op.reference(p, args, ops::Box{o, {b, h, 0, 0}, {1, 1, S, D}});
      const int64_t base = (b * H + h) * S * D;
      for (int64_t i = 0; i < S * D; ++i)
        out.set(base + i, ref[i]);
    }
}

} // namespace tp::dispatch
