// tp::interpret: the public call of the CPU interpreter (src/codegen/cpu), same argument shape
// as CompiledKernel::launch: each argument's kind (tensor, view or number) is checked against
// the parameter it is passed for; the kernel's own rules (dtype, rank, Dims) by the interpreter.
#include <cmath>

#include "codegen/cpu/Interpreter.h"
#include "ir/IRPrinter.h"
#include "tilepilot/interpret.h"

namespace tp {

void interpret(const Kernel& k, const std::vector<HostArg>& args, const InterpretOptions& o) {
  if (!k.defined()) user_error() << "tp::interpret: the kernel is empty (not built)";
  const ir::KernelNode& kn = k.node();
  std::vector<ir::ParamRef> order = kn.launch_order();
  if (args.size() != order.size())
    user_error() << "kernel '" << kn.name << "' takes " << order.size() << " arguments, got "
                 << args.size();
  std::vector<cpu::Arg> cargs;
  for (size_t i = 0; i < args.size(); ++i) {
    const HostArg& a = args[i];
    cpu::Arg c;
    if (order[i].scalar) {
      const Var& v = kn.scalars[order[i].index];
      if (!a.is_scalar())
        user_error() << "kernel '" << kn.name << "': argument " << i << " for scalar '" << v.name()
                     << "' (" << dtype_name(v.dtype()) << ") is a tensor; pass a number";
      if (v.dtype() == DType::i32 && a.is_float() && a.as_double() != std::floor(a.as_double()))
        user_error() << "kernel '" << kn.name << "': scalar '" << v.name() << "' is i32, got "
                     << a.as_double() << "; pass an integer";
      c.scalar = v.dtype() == DType::i32 ? static_cast<double>(a.as_int()) : a.as_double();
      cargs.push_back(c);
      continue;
    }
    const ir::Buffer& b = kn.params[order[i].index];
    if (a.is_scalar())
      user_error() << "kernel '" << kn.name << "': argument " << i << " for tensor '" << b->name
                   << "' is a number; pass a HostTensor";
    c.tensor = a.tensor();
    if (a.is_view()) {
      const HostView& v = a.view();
      if (v.strides.size() != v.shape.size())
        user_error() << "kernel '" << kn.name << "': the view for tensor '" << b->name << "' has "
                     << v.shape.size() << " dimensions but " << v.strides.size() << " strides";
      c.view = true;
      c.offset = v.offset;
      c.shape = v.shape;
      c.strides = v.strides;
    }
    cargs.push_back(c);
  }
  cpu::InterpretOptions io;
  io.threads = o.threads;
  io.print_out = o.print_out;
  cpu::interpret_args(k, cargs, io);
}

std::string to_string(const Kernel& k) {
  if (!k.defined()) return "<empty kernel>";
  return ir::to_string(k.node());
}

} // namespace tp
