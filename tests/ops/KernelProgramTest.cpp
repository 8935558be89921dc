// Operators whose call runs several kernels (Operator::program), on the two-kernel row sum of
// tests/support/TwoPassRowSum.h: the check on the interpreter runs the earlier step whole and
// the last step's sample, intermediates start out NaN, grid / block_outputs / estimate come
// from the steps, programs are validated with user errors that name the operator and the step,
// dispatch on host tensors runs the program, both steps compile through NVRTC for sm_90a and the
// tuner's compile hook compiles both. The Gpu* tests run the same operator through check
// --backend cuda, compile timing, the tuner's measurement and dispatch on device tensors.
#include <functional>
#include <gtest/gtest.h>

#include "TwoPassRowSum.h"
#include "autotune/CudaHooks.h"
#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "dispatch/DispatcherImpl.h"
#include "ir/IRPrinter.h"
#include "ops/Check.h"
#include "ops/CudaCheck.h"
#include "ops/CudaProgram.h"
#include "ops/HostProgram.h"
#include "perf/CompileTiming.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "runtime/Nvrtc.h"
#include "runtime/ResourceUsage.h"

using namespace tp;
using namespace tp::ops;

namespace {

const Operator& op() {
  return test::two_pass_rowsum();
}

Problem problem(int64_t R, int64_t C) {
  return op().parse({{"R", std::to_string(R)}, {"C", std::to_string(C)}}, DType::f32);
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(KernelProgram, TwoKernelOperatorPassesItsCheckOnTheInterpreter) {
  // 40 rows over 16-row blocks and 100 columns over 32-column chunks: both edges are ragged.
  CheckResult r = check(op(), problem(40, 100), {});
  EXPECT_TRUE(r.passed) << r.first_bad;
  EXPECT_EQ(r.checked, 40);
  EXPECT_EQ(r.blocks_total, 3) << "the blocks are the last step's (ceil(40 / 16))";
}

TEST(KernelProgram, SampledCheckRunsTheEarlierStepWhole) {
  // A budget below the problem's work samples the last step's blocks; each of them reads the
  // partials of every chunk of its rows, which only a whole run of step 0 writes.
  CheckOptions o;
  o.flop_budget = 1;
  CheckResult r = check(op(), problem(100, 600), o);
  EXPECT_LT(r.blocks_run, r.blocks_total);
  EXPECT_TRUE(r.passed) << r.first_bad;
}

TEST(KernelProgram, IntermediatesStartOutNaNSoAStepThatIsSkippedFails) {
  // A runner that leaves out step 0: step 1 reads partials nobody wrote.
  CheckResult r = check_program_with(op(), problem(40, 100), {},
                                     [](const KernelProgram& prog, std::vector<HostTensor>& args,
                                        const std::vector<std::array<int64_t, 3>>& blocks) {
                                       KernelProgram last = prog;
                                       last.steps.erase(last.steps.begin());
                                       std::vector<HostTensor*> ptrs;
                                       for (HostTensor& a : args)
                                         ptrs.push_back(&a);
                                       interpret_program(last, ptrs, blocks);
                                     });
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.nonfinite, r.checked);
}

TEST(KernelProgram, OneKernelRunnerRefusesAProgramOfSeveral) {
  std::string m = message_of([] {
    check_with(
        op(), problem(40, 100), {},
        [](const Kernel&, std::vector<HostTensor>&, const std::vector<std::array<int64_t, 3>>&) {});
  });
  EXPECT_NE(m.find("test_two_pass_rowsum runs 2 kernels per call"), std::string::npos) << m;
}

TEST(KernelProgram, GridAndBlockOutputsAreTheLastStepsInCallArgumentIndices) {
  Problem p = problem(40, 100);
  Config c = op().default_config(p, "cpu"); // br 16
  EXPECT_EQ(op().grid(p, c), (std::array<int64_t, 3>{3, 1, 1}));
  std::vector<Box> b = op().block_outputs(p, c, {2, 0, 0});
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].tensor, 1) << "y is the call's argument 1 (the step's parameter 1)";
  EXPECT_EQ(b[0].min, std::vector<int64_t>{32});
  EXPECT_EQ(b[0].extent, std::vector<int64_t>{8}) << "clipped to the 40 rows";
}

TEST(KernelProgram, EstimateIsTheLargestStep) {
  Problem p = problem(256, 1024);
  Config c = op().default_config(p, "sm_90a");
  Estimate e = op().estimate(p, c, "sm_90a");
  passes::Target t = passes::Target::parse("sm_90a");
  t.enforce_smem_limit = false;
  int64_t smem = 0, threads = 0;
  for (const KernelStep& s : op().program(p, c).steps) {
    cuda::LoweredKernel lk = cuda::lower_kernel(s.kernel, t);
    smem = std::max<int64_t>(smem, lk.smem_bytes);
    threads = std::max<int64_t>(threads, lk.block_threads);
  }
  EXPECT_EQ(e.smem_bytes, smem);
  EXPECT_EQ(e.block_threads, threads);
  EXPECT_GT(e.block_threads, 0);
}

TEST(KernelProgram, DefaultProgramIsTheBuiltKernelOverTheCallsArguments) {
  const Operator& gemm = find_operator("gemm");
  Problem p = gemm.parse({{"M", "64"}, {"N", "64"}, {"K", "32"}}, DType::bf16);
  Config c = gemm.default_config(p, "cpu");
  KernelProgram prog = checked_program(gemm, p, c);
  ASSERT_EQ(prog.steps.size(), 1u);
  EXPECT_TRUE(prog.intermediates.empty());
  EXPECT_EQ(prog.steps[0].args, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(ir::to_string(prog.steps[0].kernel.node(), true),
            ir::to_string(gemm.build(p, c).node(), true));
}

TEST(KernelProgram, MalformedProgramsAreUserErrorsNamingTheStepAndTheRule) {
  Problem p = problem(40, 100);
  Config c = op().default_config(p, "cpu");
  struct Case {
    const char* fault;
    std::string want;
  };
  const Case cases[] = {
      {"bad_index", "test_two_pass_rowsum: program step 0 (rowsum_partials): parameter 1 "
                    "(partials) is bound to 3, outside [0, 3)"},
      {"count", "program step 1 (rowsum_combine): the kernel has 2 tensor parameters but the "
                "step binds 1"},
      {"dtype", "program step 0 (rowsum_partials): parameter 1 (partials, f32 rank 1) is bound "
                "to intermediate 0 (bf16 [192]); the dtypes and ranks must agree"},
      {"no_output", "the program's last step (rowsum_combine) does not take output argument 1"},
      {"empty", "Operator::program returned no steps"},
  };
  for (const Case& k : cases) {
    std::unique_ptr<Operator> bad = test::broken_two_pass_rowsum(k.fault);
    std::string m = message_of([&] { checked_program(*bad, p, c); });
    EXPECT_NE(m.find(k.want), std::string::npos) << k.fault << ": " << m;
    // Every consumer validates: the check refuses the program before running anything.
    EXPECT_THROW(check(*bad, p, {}), UserError) << k.fault;
  }
  EXPECT_NO_THROW(checked_program(op(), p, c));
}

TEST(KernelProgram, HostDispatchRunsThePinnedProgram) {
  Problem p = problem(40, 100);
  Dispatcher d;
  dispatch::install_release(d, dispatch::memory_release(op().name(), {"Test GPU", "sm_90a"},
                                                        {{p, op().default_config(p, "sm_90a")}}));
  std::vector<HostTensor> a = op().make_args(p, 5);
  d.run(op().name(), {&a[0], &a[1]});
  EXPECT_EQ(d.counters(op().name()).pinned, 1);
  std::vector<double> want = op().reference(p, a, {1, {0}, {40}});
  for (int64_t r = 0; r < 40; ++r)
    EXPECT_NEAR(a[1].get(r), want[r], 1e-4 * (1 + std::fabs(want[r]))) << "row " << r;
}

TEST(KernelProgram, BothStepsCompileThroughNvrtcForSm90a) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  Problem p = problem(4096, 8192);
  KernelProgram prog = checked_program(op(), p, op().default_config(p, "sm_90a"));
  ASSERT_EQ(prog.steps.size(), 2u);
  for (const KernelStep& s : prog.steps) {
    cuda::LoweredKernel lk = cuda::lower_kernel(s.kernel, passes::Target::parse("sm_90a"));
    rt::JitKernel j =
        rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, "sm_90a", {}, true);
    EXPECT_FALSE(j.compiled.cubin.empty()) << s.kernel->name;
    rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
    EXPECT_GT(u.registers, 0) << s.kernel->name << ": " << j.compiled.log;
    EXPECT_EQ(u.spill_store_bytes, 0) << s.kernel->name << ": " << u.raw;
  }
}

TEST(KernelProgram, TunerCompileHookCompilesEveryStep) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  Problem p = problem(1024, 4096);
  autotune::TuneHooks h = autotune::cuda_tune_hooks(op(), p, "sm_90a");
  autotune::CompiledCandidate cc = h.compile(op().default_config(p, "sm_90a"));
  // Both steps' ptxas reports are in the usage, one entry each.
  EXPECT_NE(cc.usage.raw.find("rowsum_partials"), std::string::npos) << cc.usage.raw;
  EXPECT_NE(cc.usage.raw.find("rowsum_combine"), std::string::npos) << cc.usage.raw;
  EXPECT_GT(cc.usage.registers, 0);
  EXPECT_TRUE(cc.artifact);
}

// --- on an H200 ------------------------------------------------------------------------------

TEST(GpuKernelProgram, CheckOnCudaRunsBothSteps) {
  for (auto [R, C] : {std::pair<int64_t, int64_t>{40, 100}, {4096, 8192}, {1, 1}}) {
    CheckResult r = check_cuda(op(), problem(R, C), {});
    EXPECT_TRUE(r.passed) << R << "x" << C << ": " << r.first_bad;
    EXPECT_EQ(r.nonfinite, 0);
  }
}

TEST(GpuKernelProgram, CompiledProgramKeepsItsIntermediatesPerStream) {
  Problem p = problem(1000, 3000);
  std::vector<HostTensor> host = op().make_args(p, 9);
  std::vector<double> want = op().reference(p, host, {1, {0}, {1000}});
  DeviceArgs dev = DeviceArgs::upload(host);
  CudaProgram prog(checked_program(op(), p, op().default_config(p, device_arch())), device_arch());
  rt::Stream a, b;
  // Several calls on two streams: each stream's partials are its own.
  for (int i = 0; i < 3; ++i) {
    prog.launch(dev.tensors, a.get());
    prog.launch(dev.tensors, b.get());
  }
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  dev.download(host, {1});
  for (int64_t r = 0; r < 1000; ++r)
    ASSERT_NEAR(host[1].get(r), want[r], 1e-3 * (1 + std::fabs(want[r]))) << "row " << r;
}

TEST(GpuKernelProgram, ColdCompileCompilesBothSteps) {
  Problem p = problem(1024, 1024);
  DeviceArgs dev = DeviceArgs::upload(op().make_args(p, 1));
  perf::CompileReport r = perf::measure_compile(op(), p, op().default_config(p, device_arch()),
                                                device_arch(), dev.tensors);
  EXPECT_EQ(r.program.steps.size(), 2u);
  EXPECT_GT(r.cold_phases_ms[2].second, 0) << "NVRTC ran for the steps";
  EXPECT_TRUE(r.warm_cache_hit) << "both steps hit the cache when warm";
}

TEST(GpuKernelProgram, DeviceDispatchRunsThePinnedProgram) {
  Problem p = problem(300, 700);
  Dispatcher d;
  dispatch::install_release(d, dispatch::memory_release(op().name(), dispatch::current_device(),
                                                        {{p, op().default_config(p, "sm_90a")}}));
  std::vector<HostTensor> host = op().make_args(p, 2);
  std::vector<double> want = op().reference(p, host, {1, {0}, {300}});
  DeviceArgs dev = DeviceArgs::upload(host);
  std::vector<DeviceView> views;
  for (const cuda::DeviceTensor& t : dev.tensors)
    views.push_back(DeviceView{t.ptr, t.dtype, t.shape});
  d.run(op().name(), views);
  d.run(op().name(), views); // the second call reuses the compiled program and its partials
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  dev.download(host, {1});
  EXPECT_EQ(d.counters(op().name()).pinned, 2);
  for (int64_t r = 0; r < 300; ++r)
    ASSERT_NEAR(host[1].get(r), want[r], 1e-3 * (1 + std::fabs(want[r]))) << "row " << r;
}
