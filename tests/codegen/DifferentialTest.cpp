// The one semantics, checked per rule (tests/codegen/DifferentialCases.h, docs/semantics.md):
//   Differential/InterpreterRule.*   the interpreter's result equals the rule's, computed in
//                                    plain C++ (DifferentialErrors.*: the rules' user errors);
//   CudaCompileSemantics/CompileRule.*, CudaCompileSemantics*.*   the CUDA backend lowers and
//                                    compiles each case (no GPU needed), and the passes decide
//                                    as the rules require (warp roles, local tiles);
//   GpuDifferential/GpuRule.*        the interpreter and CUDA agree element by element (H200).
#include <gtest/gtest.h>

#include "DifferentialCases.h"
#include "codegen/cpu/Interpreter.h"
#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ir/IR.h"
#include "ir/IRVisitor.h"
#include "ops/CudaCheck.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"

using namespace tp;
using namespace tp::difftest;

namespace {

std::vector<std::string> case_names() {
  std::vector<std::string> out;
  for (const NamedCase& c : differential_cases())
    out.push_back(c.name);
  return out;
}

DiffCase make(const std::string& name) {
  for (const NamedCase& c : differential_cases())
    if (name == c.name) return c.make();
  ADD_FAILURE() << "no case " << name;
  return {};
}

std::vector<HostTensor*> pointers(std::vector<HostTensor>& v) {
  std::vector<HostTensor*> p;
  for (HostTensor& t : v)
    p.push_back(&t);
  return p;
}

std::string param_name(const testing::TestParamInfo<std::string>& i) {
  return i.param;
}

class InterpreterRule : public testing::TestWithParam<std::string> {};

// The interpreter computes exactly what the rule says (outputs start as a sentinel, so a write
// outside the rule's elements, or a missing one, is a mismatch).
TEST_P(InterpreterRule, FollowsTheRule) {
  DiffCase c = make(GetParam());
  std::vector<HostTensor> got = c.args, want = c.args;
  cpu::interpret(c.kernel, pointers(got));
  c.expect(want);
  for (int o : c.outputs)
    EXPECT_EQ(first_mismatch(got[o], want[o], c.tol), "") << c.name << ", output " << o;
}

// Named Differential/... so that --gtest_filter='Differential*' selects it.
INSTANTIATE_TEST_SUITE_P(Differential, InterpreterRule, testing::ValuesIn(case_names()),
                         param_name);

class CompileRule : public testing::TestWithParam<std::string> {};

// Every case lowers for sm_90a and sm_80 and its CUDA source compiles through NVRTC.
TEST_P(CompileRule, LowersAndCompiles) {
  DiffCase c = make(GetParam());
  for (std::string arch : {"sm_90a", "sm_80"}) {
    cuda::LoweredKernel lk = cuda::lower_kernel(c.kernel, passes::Target::parse(arch));
    rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, arch, {});
    EXPECT_FALSE(j.compiled.cubin.empty()) << arch << "\n" << j.compiled.log;
  }
}

INSTANTIATE_TEST_SUITE_P(CudaCompileSemantics, CompileRule, testing::ValuesIn(case_names()),
                         param_name);

/// Is `s` an Evaluate of the tp.barrier intrinsic?
bool is_barrier(const ir::Stmt& s) {
  const auto* e = ir::as<ir::Evaluate>(s);
  const auto* i = e ? ir::as<ir::Intrinsic>(e->value) : nullptr;
  return i && i->name == "tp.barrier";
}

// (e) The producer of a warp-specialized kernel runs ahead of the consumers and never runs
// their statements: a TMA coordinate read from a shared tile the consumers write cannot be
// ordered, so the planner declines to specialize and says which tile; the plain loop then gets
// a barrier between the store of the tile and the loop that reads it. The same kernel reading
// its index from a read-only global tensor is still specialized (the check is not too broad).
TEST(CudaCompileSemanticsWarpRoles, SharedTileTheProducerWouldReadIsOrderedByFallingBack) {
  passes::Target t = passes::Target::parse("sm_90a");
  Kernel shared_index = grouped_gemm_kernel(true);
  passes::LayoutInfo l = passes::infer_layouts(shared_index.node(), t);
  passes::PipelinePlan p = passes::plan_pipeline(shared_index.node(), l, t);
  EXPECT_FALSE(p.warp_specialized);
  EXPECT_NE(p.reason.find("shared 'shared0'"), std::string::npos) << p.reason;

  cuda::LoweredKernel lk = cuda::lower_kernel(shared_index, t);
  const auto* body = ir::as<ir::Seq>(lk.body_with_barriers);
  ASSERT_TRUE(body);
  int store_at = -1, loop_at = -1, barrier_at = -1;
  for (size_t i = 0; i < body->stmts.size(); ++i) {
    const ir::Stmt& s = body->stmts[i];
    if (const auto* st = ir::as<ir::Store>(s); st && st->buffer->scope == ir::Scope::shared)
      store_at = static_cast<int>(i);
    if (const auto* f = ir::as<ir::For>(s); f && f->for_kind == ir::ForKind::pipelined)
      loop_at = static_cast<int>(i);
    if (is_barrier(s) && store_at >= 0 && loop_at < 0) barrier_at = static_cast<int>(i);
  }
  ASSERT_GE(store_at, 0);
  ASSERT_GT(loop_at, store_at);
  EXPECT_GT(barrier_at, store_at) << "no barrier between the index store and the loop";
  EXPECT_LT(barrier_at, loop_at);

  Kernel global_index = grouped_gemm_kernel(false);
  passes::LayoutInfo lg = passes::infer_layouts(global_index.node(), t);
  passes::PipelinePlan pg = passes::plan_pipeline(global_index.node(), lg, t);
  EXPECT_TRUE(pg.warp_specialized) << pg.reason;
}

// alloc_local lowers for CUDA (it used to be an internal error in InferLayouts) and stays a
// per-thread array: no shared memory is planned for it.
TEST(CudaCompileSemanticsLocal, LocalTileIsAPerThreadArray) {
  DiffCase c = local_tile();
  passes::Target t = passes::Target::parse("sm_90a");
  cuda::LoweredKernel lk = cuda::lower_kernel(c.kernel, t);
  EXPECT_EQ(lk.smem_bytes, 0);
  passes::LayoutInfo l = passes::infer_layouts(c.kernel.node(), t);
  bool found = false;
  ir::for_each_stmt(c.kernel->body, [&](const ir::Stmt& s) {
    if (const auto* a = ir::as<ir::Allocate>(s); a && a->buffer->scope == ir::Scope::local) {
      found = true;
      EXPECT_FALSE(l.in_shared(a->buffer));
      EXPECT_FALSE(l.in_registers(a->buffer)); // not a distributed fragment
    }
  });
  EXPECT_TRUE(found);
}

// A local tile written by a parallel loop that follows a register fragment's layout would hold
// different elements in different threads: a user error naming both tiles.
TEST(CudaCompileSemanticsLocal, LocalStoredInARegisterLoopIsAUserError) {
  Kernel k = gemm_kernel("local_in_register_loop", [](Tile& acc, Tensor& C, Var bx, Var by) {
    Tile L = alloc_local({64, 64}, f32);
    parallel({64, 64}, [&](Var i, Var j) { L(i, j) = acc(i, j); });
    parallel({64, 64}, [&](Var i, Var j) { acc(i, j) = L(i, j); });
    copy(acc, C.tile(by * 64, bx * 64));
  });
  try {
    cuda::lower_kernel(k, passes::Target::parse("sm_90a"));
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("stores into local tile 'local"), std::string::npos) << m;
    EXPECT_NE(m.find("register fragment 'frag"), std::string::npos) << m;
  }
}

// The chosen side of a select is still checked: an out-of-bounds element read there is the
// interpreter's user error (the laziness does not hide real out-of-bounds reads).
TEST(DifferentialErrors, ChosenSideOutOfBoundsIsStillAUserError) {
  Dim N("N");
  Tensor A("A", {N}, f32), B("B", {N}, f32);
  Kernel k = kernel("select_oob", {A, B}, grid(1), threads(128), [&](Var) {
    parallel({8}, [&](Var i) { B(i) = select(i < 4, A(i + 8), Expr(0.0)); });
  });
  HostTensor a(f32, {8}), b(f32, {8});
  try {
    cpu::interpret(k, {&a, &b});
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("out-of-bounds read of 'A' at [8]"), std::string::npos)
        << e.what();
  }
}

// Ranks above the documented maximum are refused where the tensor is made.
TEST(DifferentialErrors, TensorRankAboveTheMaximumIsAUserError) {
  std::vector<Expr> shape(ir::kMaxRank + 1, Expr(2));
  try {
    Tensor t("T", shape, f32);
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'T' has 9 dimensions; tensors have at most 8"),
              std::string::npos)
        << e.what();
  }
}

// --- GPU ----------------------------------------------------------------------------------------

class GpuRule : public testing::TestWithParam<std::string> {};

// The interpreter and CUDA agree element by element (sentinel-filled outputs on both sides).
TEST_P(GpuRule, InterpreterAndCudaAgree) {
  DiffCase c = make(GetParam());
  std::vector<HostTensor> cpu_out = c.args, gpu_out = c.args;
  cpu::interpret(c.kernel, pointers(cpu_out));
  rt::ensure_context();
  ops::DeviceArgs d = ops::DeviceArgs::upload(gpu_out);
  cuda::CudaKernel ck(c.kernel, ops::device_arch());
  ck.launch(d.tensors);
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  d.download(gpu_out, c.outputs);
  for (int o : c.outputs)
    EXPECT_EQ(first_mismatch(gpu_out[o], cpu_out[o], c.tol), "") << c.name << ", output " << o;
}

INSTANTIATE_TEST_SUITE_P(GpuDifferential, GpuRule, testing::ValuesIn(case_names()), param_name);

} // namespace

// Two copies into one shared tile in a pipelined loop, with a read between them: the TMA
// producer would issue both ahead of the consumers, so the loop is not warp-specialized (the
// plain loop keeps program order), while the same loop with one copy per tile still is.
TEST(CudaCompileSemanticsWarpRoles, TileFilledTwicePerIterationIsNotWarpSpecialized) {
  auto build = [](bool twice) {
    Dim M("M"), N("N"), K("K");
    Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
    return kernel("twice", {A, B, C}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                  [&](Var bx, Var by) {
                    Tile As = alloc_shared({64, 32}, bf16);
                    Tile Bs = alloc_shared({32, 64}, bf16);
                    Tile acc = alloc_fragment({64, 64}, f32);
                    clear(acc);
                    pipelined(ceildiv(K, 32), 2, [&](Var k) {
                      copy(A.tile(by * 64, k * 32), As);
                      copy(B.tile(k * 32, bx * 64), Bs);
                      gemm(As, Bs, acc);
                      if (twice) copy(B.tile(k * 32 + 1, bx * 64), Bs);
                    });
                    copy(acc, C.tile(by * 64, bx * 64));
                  });
  };
  passes::Target t = passes::Target::parse("sm_90a");
  for (bool twice : {true, false}) {
    Kernel k = build(twice);
    passes::LayoutInfo l = passes::infer_layouts(k.node(), t);
    passes::PipelinePlan p = passes::plan_pipeline(k.node(), l, t);
    EXPECT_EQ(p.warp_specialized, !twice) << p.reason;
    if (twice)
      EXPECT_NE(p.reason.find("filled by more than one copy"), std::string::npos) << p.reason;
  }
}

// A gemm inside a conditional of the pipelined loop runs unspecialized (it faulted on the H200
// when warp-specialized: random program 978 of 9021ab7).
TEST(CudaCompileSemanticsWarpRoles, GemmUnderAConditionInTheLoopIsNotWarpSpecialized) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  Kernel k = kernel("cond_gemm", {A, B, C}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                    [&](Var bx, Var by) {
                      Tile As = alloc_shared({64, 32}, bf16);
                      Tile Bs = alloc_shared({32, 64}, bf16);
                      Tile acc = alloc_fragment({64, 64}, f32);
                      clear(acc);
                      pipelined(ceildiv(K, 32), 2, [&](Var kk) {
                        copy(A.tile(by * 64, kk * 32), As);
                        copy(B.tile(kk * 32, bx * 64), Bs);
                        if_then(bx == 0, [&] { gemm(As, Bs, acc); });
                      });
                      copy(acc, C.tile(by * 64, bx * 64));
                    });
  passes::Target t = passes::Target::parse("sm_90a");
  passes::LayoutInfo l = passes::infer_layouts(k.node(), t);
  passes::PipelinePlan p = passes::plan_pipeline(k.node(), l, t);
  EXPECT_FALSE(p.warp_specialized);
  EXPECT_NE(p.reason.find("gemm inside a conditional"), std::string::npos) << p.reason;
}

// A staged tile smaller than 1024 bytes a stage (B: 32 x 8 bf16, 512 bytes): its stages lie
// stage_bytes (1024) apart for the element-wise cp.async writes as for the gemm's ldmatrix
// reads. They disagreed (writes 512 bytes apart, reads 1024), found on the H200 by the
// one-warp mma cases and random program 902 once sm_90a ran such gemms as mma.
TEST(CudaCompileSemanticsStages, SmallStagedTileIsWrittenWhereTheGemmReadsIt) {
  DiffCase c = one_warp_mma_pipelined();
  cuda::LoweredKernel lk = cuda::lower_kernel(c.kernel, passes::Target::parse("sm_90a"));
  // Stage 1's prefetch of B (elements) and the gemm's read of stage ko % 3 (bytes).
  EXPECT_NE(lk.lowered_text.find("tp.ptr(shared2, (512 + "), std::string::npos) << lk.lowered_text;
  EXPECT_NE(lk.lowered_text.find("((ko % 3) * 1024)"), std::string::npos) << lk.lowered_text;
  EXPECT_EQ(lk.lowered_text.find("tp.ptr(shared2, (256 + "), std::string::npos);
}
