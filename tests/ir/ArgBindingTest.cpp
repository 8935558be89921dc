// Launch-argument checks: wrong dtype, rank, constant extent or conflicting Dim bindings are
// user errors naming the tensor and what was expected.
#include <gtest/gtest.h>

#include "codegen/cpu/Interpreter.h"
#include "tilepilot/tilepilot.h"

using namespace tp;

namespace {
Kernel two_tensor_kernel() {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), C("C", {M, 16}, f32);
  return kernel("k", {A, C}, grid(1), threads(32), [&](Var) {});
}

std::string error_of(const Kernel& k, std::vector<HostTensor*> args) {
  try {
    cpu::interpret(k, args);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}
} // namespace

TEST(ArgBinding, ConflictingDimNamesBothTensors) {
  Kernel k = two_tensor_kernel();
  HostTensor a(bf16, {8, 4}), c(f32, {9, 16});
  std::string msg = error_of(k, {&a, &c});
  EXPECT_NE(msg.find("Dim M is 8 from tensor 'A' but 9 from tensor 'C'"), std::string::npos) << msg;
}

TEST(ArgBinding, WrongDtype) {
  Kernel k = two_tensor_kernel();
  HostTensor a(f16, {8, 4}), c(f32, {8, 16});
  std::string msg = error_of(k, {&a, &c});
  EXPECT_NE(msg.find("tensor 'A' must be bf16, got f16"), std::string::npos) << msg;
}

TEST(ArgBinding, WrongRankAndConstantExtent) {
  Kernel k = two_tensor_kernel();
  HostTensor a(bf16, {8, 4, 2}), c(f32, {8, 16});
  EXPECT_NE(error_of(k, {&a, &c}).find("tensor 'A' must be 2-d"), std::string::npos);
  HostTensor a2(bf16, {8, 4}), c2(f32, {8, 15});
  EXPECT_NE(error_of(k, {&a2, &c2}).find("tensor 'C' dimension 1 must be 16"), std::string::npos);
}

TEST(ArgBinding, WrongArgumentCount) {
  Kernel k = two_tensor_kernel();
  HostTensor a(bf16, {8, 4});
  EXPECT_NE(error_of(k, {&a}).find("takes 2 tensors, got 1"), std::string::npos);
}
