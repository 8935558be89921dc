// Strided views on the way into an operator (Operator::strided_arg): attention reads Q, K and V
// in place. On the interpreter its kernel over [B, S, H, D] buffers viewed as [B, H, S, D] gives
// the contiguous run's output bit for bit; a program that claims a strided argument but binds it
// to a contiguous parameter is rejected; and the dispatcher refuses, before anything runs, a view
// the operator cannot take (a gemm operand, a non-unit innermost stride, an unaligned start).
// GpuStridedViews (GpuStridedViewsTest.cpp) runs the same views through the pinned kernel,
// cuDNN and the unfused reference.
#include <cstring>
#include <gtest/gtest.h>

#include "DispatchTestSupport.h"
#include "UserErrorText.h"
#include "ir/IR.h"
#include "ops/attention/AttentionOp.h"
#include "ops/rmsnorm/RmsNormOp.h"

using namespace tp;
using namespace tp::ops;
using test::heads_view;
using test::problem;
using test::user_error_text;

TEST(StridedViews, AttentionOnHeadViewsMatchesTheContiguousRunBitForBit) {
  for (const char* shape :
       {"B=2,H=4,Hkv=2,S=40,Skv=40,D=64,causal=1", "B=1,H=2,Hkv=1,S=33,Skv=70,D=64,causal=0"}) {
    SCOPED_TRACE(shape);
    const Operator& op = find_operator("attention");
    Problem p = problem("attention", shape);
    Kernel k = op.build(p, op.default_config(p, "cpu"));
    std::vector<HostTensor> dense = op.make_args(p, 11), viewed = dense;
    interpret(k, {&dense[0], &dense[1], &dense[2], &dense[3]});
    HostTensor qb, kb, vb, ob;
    // Q, V and O in the head-interleaved layout; K also with a padded row (pitch D + 8).
    HostView o = heads_view(viewed[3], ob, 4);
    interpret(k, {heads_view(viewed[0], qb, 0), heads_view(viewed[1], kb, 8),
                  heads_view(viewed[2], vb, 0), o});
    const auto& sh = dense[3].shape();
    int64_t differ = 0, i = 0;
    for (int64_t b = 0; b < sh[0]; ++b)
      for (int64_t h = 0; h < sh[1]; ++h)
        for (int64_t s = 0; s < sh[2]; ++s)
          for (int64_t d = 0; d < sh[3]; ++d, ++i) {
            const double got =
                ob.get(b * o.strides[0] + h * o.strides[1] + s * o.strides[2] + d * o.strides[3]);
            const double want = dense[3].get(i);
            differ += std::memcmp(&got, &want, sizeof got) != 0;
          }
    EXPECT_EQ(differ, 0) << "of " << i;
    // The padding of O's rows is untouched.
    EXPECT_EQ(ob.get(sh[3]), -7);
  }
}

TEST(StridedViews, TheAttentionKernelDeclaresItsStridedArguments) {
  const Operator& op = find_operator("attention");
  Problem p = problem("attention", "B=1,H=2,Hkv=1,S=16,Skv=16,D=64,causal=1");
  KernelProgram prog = checked_program(op, p, op.default_config(p, "sm_90a"));
  const ir::KernelNode& k = prog.steps.at(0).kernel.node();
  for (size_t i = 0; i < k.params.size(); ++i)
    EXPECT_EQ(!k.params[i]->strides.empty(), op.strided_arg(p, i)) << k.params[i]->name;
}

namespace {

/// RMSNorm that claims its input may be a view, though its kernel takes it contiguous.
class ClaimsAView : public RmsNormOp {
public:
  bool strided_arg(const Problem&, size_t i) const override { return i == 0; }
};

} // namespace

TEST(StridedViews, AProgramThatClaimsAViewItsKernelCannotTakeIsRejected) {
  ClaimsAView op;
  Problem p = op.parse({{"T", "4"}, {"H", "64"}}, DType::bf16);
  std::string e = user_error_text([&] { checked_program(op, p, op.default_config(p, "cpu")); });
  EXPECT_NE(e.find("strided_arg"), std::string::npos) << e;
  EXPECT_NE(e.find("tp::strided"), std::string::npos) << e;
}

TEST(StridedViews, TheDispatcherRefusesViewsAnOperatorCannotTake) {
  std::vector<std::string> log;
  Dispatcher d(test::capture_log(&log));
  // A transposed gemm operand: gemm takes its operands contiguous (layout says how to read them).
  DeviceView A{16, DType::bf16, {4, 8}, {1, 4}}, B{16, DType::bf16, {8, 6}},
      C{16, DType::bf16, {4, 6}};
  std::string e = user_error_text([&] { d.gemm(A, B, C, "nn"); });
  EXPECT_NE(e.find("gemm device tensor 0 is a strided view"), std::string::npos) << e;
  EXPECT_NE(e.find("contiguous copy"), std::string::npos) << e;

  const int64_t Bn = 1, H = 2, S = 16, D = 64;
  DeviceView q{256, DType::bf16, {Bn, H, S, D}, {S * H * D, D, H * D, 1}};
  DeviceView k{512, DType::bf16, {Bn, H, S, D}}, v = k, o{1024, DType::bf16, {Bn, H, S, D}};
  DeviceView bad_inner = q;
  bad_inner.strides = {S * H * D * 2, D * 2, H * D * 2, 2};
  e = user_error_text([&] { d.attention(bad_inner, k, v, o, true); });
  EXPECT_NE(e.find("innermost stride 2"), std::string::npos) << e;
  DeviceView unaligned = q;
  unaligned.ptr = 258;
  e = user_error_text([&] { d.attention(unaligned, k, v, o, true); });
  EXPECT_NE(e.find("not 16-byte aligned (address % 16 = 2)"), std::string::npos) << e;
  DeviceView short_strides = q;
  short_strides.strides = {D, 1};
  e = user_error_text([&] { d.attention(short_strides, k, v, o, true); });
  EXPECT_NE(e.find("2 strides for 4 dimensions"), std::string::npos) << e;
  // Strides that are the contiguous ones (a size-1 dimension's stride is free) are no view:
  // the error names B, the one real view, not A.
  DeviceView A1{16, DType::bf16, {1, 8}, {99, 1}}, Bt{16, DType::bf16, {8, 6}, {1, 8}},
      C1{16, DType::bf16, {1, 6}};
  e = user_error_text([&] { d.gemm(A1, Bt, C1, "nn"); });
  EXPECT_NE(e.find("gemm device tensor 1 is a strided view"), std::string::npos) << e;
  EXPECT_EQ(d.counters("attention").pinned + d.counters("attention").fallbacks(), 0)
      << "nothing ran";
}
