// Scalar kernel parameters, `let` and strided tensors through the public API, without a GPU:
// values reach the interpreter, wrong kinds of argument are user errors naming the parameter,
// a let is evaluated once, a strided view of a bigger tensor computes what a dense copy does,
// and kernels using all three lower and compile through NVRTC (sm_90a with TMA and warp
// specialization, without TMA, and sm_80).
#include <gtest/gtest.h>

#include "KernelsForParams.h"
#include "ir/IR.h"
#include "ir/IRPrinter.h"

using namespace tp;

namespace {

template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no user error>";
}

TEST(KernelParams, ScalarValuesReachTheInterpreter) {
  Kernel k = test::scale_shift(false);
  HostTensor x(f32, {37, 70}), y(f32, {37, 70});
  x.fill_random(3);
  y.poison();
  interpret(k, {x, 0.5f, y, 3});
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(y.get(i), round_to(f32, x.get(i) * 0.5 + 3.0)) << "element " << i;
  // Another value, same kernel: the value is an argument, not part of the kernel.
  interpret(k, {x, -2.0, y, -1});
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(y.get(i), round_to(f32, x.get(i) * -2.0 - 1));
}

TEST(KernelParams, ScalarsAreInTheSignatureNotTheKey) {
  Kernel k = test::scale_shift(false);
  ASSERT_EQ(k->scalars.size(), 2u);
  std::vector<ir::ParamRef> order = k->launch_order();
  ASSERT_EQ(order.size(), 4u);
  EXPECT_TRUE(!order[0].scalar && order[1].scalar && !order[2].scalar && order[3].scalar);
  std::string canon = ir::to_string(k.node(), true);
  EXPECT_NE(canon.find(": f32, p"), std::string::npos) << canon; // scale between X and Y
  // Two builds give one canonical text (hence one cache entry whatever the scalars' values).
  EXPECT_EQ(canon, ir::to_string(test::scale_shift(false).node(), true));
  EXPECT_NE(canon, ir::to_string(test::scale_shift(true).node(), true));
}

TEST(KernelParams, WrongKindOfArgumentIsAUserError) {
  Kernel k = test::scale_shift(false);
  HostTensor x(f32, {16, 32}), y(f32, {16, 32});
  std::string e = error_of([&] { interpret(k, {x, y, y, 3}); });
  EXPECT_NE(e.find("argument 1 for scalar 'scale' (f32) is a tensor"), std::string::npos) << e;
  e = error_of([&] { interpret(k, {x, 1.0f, 2.0f, 3}); });
  EXPECT_NE(e.find("argument 2 for tensor 'Y' is a number"), std::string::npos) << e;
  e = error_of([&] { interpret(k, {x, 1.0f, y, 2.5}); });
  EXPECT_NE(e.find("scalar 'shift' is i32, got 2.5"), std::string::npos) << e;
  e = error_of([&] { interpret(k, {x, 1.0f, y}); });
  EXPECT_NE(e.find("takes 4 arguments, got 3"), std::string::npos) << e;
  // The launch checks the same before it needs a GPU.
  CompiledKernel ck = compile(k, {.arch = "sm_90a"});
  DeviceTensor dx(uint64_t{1} << 20, f32, {16, 32});
  e = error_of([&] { ck.launch({dx, dx, dx, 3}); });
  EXPECT_NE(e.find("argument 1 for scalar 'scale' (f32) is a tensor"), std::string::npos) << e;
  e = error_of([&] { ck.launch({dx, 1.0f, 7, 3}); });
  EXPECT_NE(e.find("argument 2 for tensor 'Y' is a number"), std::string::npos) << e;
}

TEST(KernelParams, ScalarDtypeAndNameRules) {
  std::string e = error_of([] { Scalar s("s", bf16); });
  EXPECT_NE(e.find("scalar 's' is bf16; scalar kernel parameters are f32 or i32"),
            std::string::npos)
      << e;
  e = error_of([] {
    Dim N("N");
    Tensor X("X", {N}, f32);
    Scalar x("X", f32);
    kernel("dup", {X, x}, grid(1), threads(32), [&](Var) {});
  });
  EXPECT_NE(e.find("two parameters are named 'X'"), std::string::npos) << e;
}

/// A let reads C(0) once; the kernel then overwrites C(0). Inlined, the uses would see 100.
Kernel let_once() {
  Tensor C("C", {1}, f32), O("O", {2}, f32);
  return kernel("let_once", {C, O}, grid(1), threads(32), [&](Var) {
    Var v = let("v", C(0) + 1.0f);
    C(0) = 100.0f;
    O(0) = v;
    O(1) = v * 2.0f;
  });
}

TEST(Let, IsEvaluatedOnceWhereItStands) {
  Kernel k = let_once();
  // The Let's body is the rest of its scope.
  const auto* let = ir::as<ir::Let>(k->body);
  ASSERT_TRUE(let) << ir::to_string(k.node());
  const auto* rest = ir::as<ir::Seq>(let->body);
  ASSERT_TRUE(rest && rest->stmts.size() == 3) << ir::to_string(k.node());
  HostTensor c(f32, {1}), o(f32, {2});
  c.set(0, 4.0);
  o.poison();
  interpret(k, {c, o});
  EXPECT_EQ(c.get(0), 100.0);
  EXPECT_EQ(o.get(0), 5.0);
  EXPECT_EQ(o.get(1), 10.0);
}

TEST(Let, UseOutsideItsScopeIsAUserError) {
  std::string e = error_of([] {
    Tensor O("O", {4}, i32);
    kernel("escape", {O}, grid(1), threads(32), [&](Var bx) {
      Var saved("unused");
      serial(4, [&](Var i) { saved = let("twice", i * 2); });
      O(0) = saved;
    });
  });
  EXPECT_NE(e.find("'twice' is used outside the scope of the let that defined it"),
            std::string::npos)
      << e;
}

TEST(Let, InsidePipelinedGemmMatchesReference) {
  HostTensor a(bf16, {100, 70}), b(bf16, {70, 90}), c(f32, {100, 90}), ref(f32, {100, 90});
  a.fill_random(1);
  b.fill_random(2);
  c.poison();
  interpret(test::let_gemm(), {a, b, c});
  test::gemm_reference(a, b, ref);
  for (int64_t i = 0; i < c.numel(); ++i)
    ASSERT_NEAR(c.get(i), ref.get(i), 1e-3) << i;
}

TEST(Strided, ViewOfBiggerTensorEqualsDenseResult) {
  // Rows 5..41 and columns 3..72 of a [50, 80] tensor, against a dense copy of that box.
  HostTensor big(f32, {50, 80}), dense(f32, {37, 70}), y1(f32, {37, 70}), y2(f32, {37, 70});
  big.fill_random(9);
  for (int64_t i = 0; i < 37; ++i)
    for (int64_t j = 0; j < 70; ++j)
      dense.set(i * 70 + j, big.get((i + 5) * 80 + j + 3));
  y1.poison();
  y2.poison();
  interpret(test::scale_shift(false), {dense, 1.5f, y1, 2});
  interpret(test::scale_shift(true), {HostView{&big, 5 * 80 + 3, {37, 70}, {80, 1}}, 1.5f, y2, 2});
  for (int64_t i = 0; i < y1.numel(); ++i)
    ASSERT_EQ(y1.get(i), y2.get(i)) << i;
  // A strided output: the view's elements are written, the rest of the tensor is not.
  HostTensor out(f32, {40, 100});
  out.fill(-7);
  interpret(test::scale_shift(false, true),
            {dense, 1.5f, HostView{&out, 2 * 100 + 10, {37, 70}, {100, 1}}, 2});
  for (int64_t i = 0; i < 40; ++i)
    for (int64_t j = 0; j < 100; ++j) {
      bool in = i >= 2 && i < 39 && j >= 10 && j < 80;
      ASSERT_EQ(out.get(i * 100 + j), in ? y1.get((i - 2) * 70 + j - 10) : -7.0) << i << "," << j;
    }
}

TEST(Strided, TransposedOperandEqualsDenseResult) {
  // A given as the transpose of a [K, M] tensor, B as columns of a wider buffer.
  int64_t M = 70, N = 50, K = 40;
  HostTensor a(bf16, {M, K}), at(bf16, {K, M}), bw(bf16, {K, N + 24}), b(bf16, {K, N});
  a.fill_random(4);
  bw.fill_random(5);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      at.set(k * M + i, a.get(i * K + k));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j)
      b.set(k * N + j, bw.get(k * (N + 24) + 8 + j));
  HostTensor c1(f32, {M, N}), c2(f32, {M, N});
  c1.poison();
  c2.poison();
  interpret(test::let_gemm(), {a, b, c1});
  interpret(test::let_gemm(true, true),
            {HostView{&at, 0, {M, K}, {1, M}}, HostView{&bw, 8, {K, N}, {N + 24, 1}}, c2});
  for (int64_t i = 0; i < c1.numel(); ++i)
    ASSERT_EQ(c1.get(i), c2.get(i)) << i;
}

TEST(Strided, BadStridesAreUserErrors) {
  HostTensor big(f32, {50, 80}), y(f32, {37, 70});
  Kernel k = test::scale_shift(true);
  std::string e = error_of([&] {
    interpret(k, {HostView{&big, 0, {37, 70}, {-80, 1}}, 1.0f, y, 0});
  });
  EXPECT_NE(e.find("tensor 'X' has stride -80 in dimension 0"), std::string::npos) << e;
  e = error_of([&] { interpret(k, {HostView{&big, 20 * 80, {37, 70}, {80, 1}}, 1.0f, y, 0}); });
  EXPECT_NE(e.find("the view passed for tensor 'X'"), std::string::npos) << e;
  e = error_of([&] {
    interpret(test::scale_shift(false), {HostView{&big, 0, {37, 70}, {80, 1}}, 1.0f, y, 0});
  });
  EXPECT_NE(e.find("but the parameter is contiguous; declare it strided"), std::string::npos) << e;
  // At launch (checked before a GPU is needed): 16-byte alignment of a strided tensor, the
  // 32-bit offset limit.
  CompiledKernel ck = compile(k, {.arch = "sm_90a"});
  DeviceTensor yd(uint64_t{1} << 20, f32, {37, 70});
  e = error_of([&] {
    ck.launch({DeviceTensor((uint64_t{1} << 20) + 4, f32, {37, 70}, {80, 1}), 1.0f, yd, 0});
  });
  EXPECT_NE(e.find("strided tensor 'X' starts at an address that is not 16-byte aligned"),
            std::string::npos)
      << e;
  e = error_of([&] {
    ck.launch({DeviceTensor(uint64_t{1} << 20, f32, {37, 70}, {int64_t{1} << 26, 1}), 1.0f, yd, 0});
  });
  EXPECT_NE(e.find("generated kernels index with 32-bit integers"), std::string::npos) << e;
}

/// Lowers and compiles `k` through NVRTC: sm_90a with and without TMA, and sm_80.
void compiles_everywhere(const Kernel& k, bool expect_ws) {
  CompiledKernel ck90 = compile(k, {.arch = "sm_90a", .bypass_cache = true});
  for (bool tma : {true, false}) {
    std::string ptx = ck90.ptx(tma);
    EXPECT_NE(ptx.find(".entry"), std::string::npos);
    if (tma && expect_ws) {
      EXPECT_NE(ck90.lowered(true).find("pipeline: warp-specialized"), std::string::npos)
          << ck90.lowered(true);
      EXPECT_NE(ptx.find("cp.async.bulk.tensor"), std::string::npos);
    }
  }
  CompiledKernel ck80 = compile(k, {.arch = "sm_80", .bypass_cache = true});
  EXPECT_NE(ck80.ptx().find(".entry"), std::string::npos);
}

TEST(KernelParamsCompile, ScalarsPassByValue) {
  Kernel k = test::scale_shift(false);
  compiles_everywhere(k, false);
  std::string src = compile(k, {.arch = "sm_90a"}).source();
  EXPECT_NE(src.find("float scale"), std::string::npos) << src;
  EXPECT_NE(src.find("int shift"), std::string::npos) << src;
}

TEST(KernelParamsCompile, LetInPipelinedLoopKeepsWarpSpecialization) {
  Kernel k = test::let_gemm();
  compiles_everywhere(k, true);
  std::string src = compile(k, {.arch = "sm_90a"}).source();
  // k0 is declared once in the producer's loop and once in the consumers' loop.
  size_t n = 0;
  for (size_t at = src.find("const int k0 = "); at != std::string::npos;
       at = src.find("const int k0 = ", at + 1))
    ++n;
  EXPECT_EQ(n, 2u) << src;
}

TEST(KernelParamsCompile, StridedTensorsLower) {
  Kernel k = test::let_gemm(true, true, true);
  compiles_everywhere(k, true);
  std::string src = compile(k, {.arch = "sm_90a"}).source(false);
  EXPECT_NE(src.find("int A_stride0"), std::string::npos) << src;
  EXPECT_NE(src.find("C_stride1"), std::string::npos) << src;
  compiles_everywhere(test::scale_shift(true, true), false);
}

TEST(KernelParamsCompile, LetFromGlobalFeedsTheTmaProducer) {
  // The producer evaluates the let too (it reads a tensor the kernel does not write).
  Kernel k = test::table_gemm(false);
  compiles_everywhere(k, true);
  std::string src = compile(k, {.arch = "sm_90a"}).source();
  size_t n = 0;
  for (size_t at = src.find("const int row0 = "); at != std::string::npos;
       at = src.find("const int row0 = ", at + 1))
    ++n;
  EXPECT_EQ(n, 2u) << src;
  // Through a tile the consumers fill, the producer cannot see it: plain cooperative copies.
  std::string lowered = compile(test::table_gemm(true), {.arch = "sm_90a"}).lowered();
  EXPECT_NE(lowered.find("not warp-specialized (the TMA loads' offsets need let 'row0', whose "
                         "value reads tile"),
            std::string::npos)
      << lowered;
  compiles_everywhere(test::table_gemm(true), false);
}

TEST(Let, TableGemmMatchesReference) {
  // Two groups of rows: block rows start at 64 and 0 (the table's order, not the grid's).
  HostTensor a(bf16, {128, 40}), b(bf16, {40, 64}), rows(i32, {2}), ref(f32, {128, 64});
  a.fill_random(6);
  b.fill_random(7);
  rows.set(0, 64);
  rows.set(1, 0);
  test::gemm_reference(a, b, ref);
  for (bool from_tile : {false, true}) {
    HostTensor c(f32, {128, 64});
    c.poison();
    interpret(test::table_gemm(from_tile), {a, b, c, rows});
    for (int64_t i = 0; i < c.numel(); ++i)
      ASSERT_NEAR(c.get(i), ref.get(i), 1e-3) << i;
  }
}

} // namespace
