// Lesson 3: attention forward with online softmax. One block owns bm query rows; it loops over
// key blocks, keeps a running row max and row sum in fragments, rescales the partial output,
// and normalises at the end. Causal masking and grouped heads are element-wise selects and
// index arithmetic in the kernel (src/ops/AttentionOp.cpp). Run: build/example_03_attention
#include <cstdio>

#include "ir/IRPrinter.h"
#include "ops/AttentionOp.h"
#include "ops/Check.h"

using namespace tp;

int main() {
  ops::AttentionVariant v;
  v.D = 64;
  v.causal = true;
  ops::Config c{{"bm", 64}, {"bn", 64}, {"stages", 1}, {"threads", 128}};
  std::printf("%s\n", ir::to_string(ops::attention_kernel(v, c).node()).c_str());
  const ops::Operator& op = ops::find_operator("attention");
  ops::Problem p =
      op.parse(ops::parse_kv("B=2,H=4,Hkv=2,S=77,Skv=100,D=64,causal=1", "shape"), bf16);
  ops::CheckOptions o;
  o.config = c;
  ops::CheckResult r = ops::check(op, p, o);
  std::printf("%s\n", ops::to_json(r).dump(2).c_str());
  return r.passed ? 0 : 1;
}
