// The CPU interpreter over a kernel program's steps.
#include "ops/HostProgram.h"

#include "codegen/cpu/Interpreter.h"

namespace tp::ops {

void interpret_program(const KernelProgram& prog, const std::vector<HostTensor*>& args,
                       const std::vector<std::array<int64_t, 3>>& last_blocks) {
  // Fresh and poisoned per call: intermediates carry nothing from one call to the next.
  std::vector<HostTensor> scratch;
  for (const ArgSpec& s : prog.intermediates) {
    scratch.emplace_back(s.dtype, s.shape);
    scratch.back().poison();
  }
  for (size_t s = 0; s < prog.steps.size(); ++s) {
    const KernelStep& step = prog.steps[s];
    std::vector<HostTensor*> bound;
    for (int b : step.args)
      bound.push_back(b < static_cast<int>(args.size()) ? args.at(b)
                                                        : &scratch.at(b - args.size()));
    cpu::InterpretOptions io;
    // Sampled blocks of the last step read any block's intermediates: earlier steps run whole.
    if (s + 1 == prog.steps.size()) io.blocks = last_blocks;
    cpu::interpret(step.kernel, bound, io);
  }
}

} // namespace tp::ops
