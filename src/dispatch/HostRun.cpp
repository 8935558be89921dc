// Host execution of dispatched calls.
#include "dispatch/HostRun.h"

#include "ops/HostProgram.h"

namespace tp::dispatch {

void run_interpreter(const ops::KernelProgram& prog, const std::vector<HostTensor*>& args) {
  ops::interpret_program(prog, args);
}

void run_host_framework(const ops::Problem& p, const std::vector<HostTensor*>& args) {
  const ops::Operator& op = ops::find_operator(p.op);
  // The framework works on the operator's argument list by value; outputs are copied back.
  std::vector<HostTensor> work;
  for (const HostTensor* t : args)
    work.push_back(*t);
  op.run_host_framework(p, work);
  for (int o : op.outputs(p))
    *args.at(o) = std::move(work.at(o));
}

} // namespace tp::dispatch
