// Lesson 2: a tiled GEMM with a pipelined K loop. C = A * B, bf16 inputs, f32 accumulator in a
// fragment, the K loop staged through shared memory. This is the operator library's kernel
// (src/ops/GemmOp.cpp); here it is built by hand for one config and checked against fp64.
// Run: build/example_02_gemm [M N K]
#include <cstdio>
#include <cstdlib>

#include "ir/IRPrinter.h"
#include "ops/Check.h"
#include "ops/GemmOp.h"

using namespace tp;

int main(int argc, char** argv) {
  std::string shape = "M=77,N=45,K=133";
  if (argc == 4) shape = std::string("M=") + argv[1] + ",N=" + argv[2] + ",K=" + argv[3];
  ops::Config c{{"bm", 64}, {"bn", 64}, {"bk", 32}, {"stages", 2}, {"threads", 128}};
  std::printf("%s\n", ir::to_string(ops::gemm_kernel(bf16, "nn", c).node()).c_str());
  const ops::Operator& op = ops::find_operator("gemm");
  ops::Problem p = op.parse(ops::parse_kv(shape, "shape"), bf16);
  ops::CheckOptions o;
  o.config = c;
  ops::CheckResult r = ops::check(op, p, o);
  std::printf("%s\n", ops::to_json(r).dump(2).c_str());
  return r.passed ? 0 : 1;
}
