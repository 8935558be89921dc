// tp::interpret: the public call of the CPU interpreter (src/codegen/cpu), same argument shape
// as CompiledKernel::launch.
#include "tilepilot/interpret.h"
#include "codegen/cpu/Interpreter.h"
#include "ir/IRPrinter.h"

namespace tp {

void interpret(const Kernel& k, const std::vector<HostArg>& args, const InterpretOptions& o) {
  if (!k.defined()) user_error() << "tp::interpret: the kernel is empty (not built)";
  const ir::KernelNode& kn = k.node();
  if (args.size() != kn.params.size())
    user_error() << "kernel '" << kn.name << "' takes " << kn.params.size() << " arguments, got "
                 << args.size();
  std::vector<HostTensor*> tensors;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_scalar())
      user_error() << "kernel '" << kn.name << "': argument " << i << " for tensor '"
                   << kn.params[i]->name << "' is a number; pass a HostTensor";
    tensors.push_back(args[i].tensor());
  }
  cpu::InterpretOptions io;
  io.threads = o.threads;
  io.print_out = o.print_out;
  cpu::interpret(k, tensors, io);
}

std::string to_string(const Kernel& k) {
  if (!k.defined()) return "<empty kernel>";
  return ir::to_string(k.node());
}

} // namespace tp
