// Random small tile programs on the GPU (ctest label gpu; issue 14 §2): each program runs on the
// interpreter and through the CUDA backend with the same random inputs and poisoned outputs,
// and every output element must agree (bit for bit, or within the program's tolerance when it
// uses exp2). A mismatch prints the seed, the first differing index and values and the program.
// Batches: TILEPILOT_RANDPROG_SEEDS (default 1000) programs from TILEPILOT_RANDPROG_START
// (default 0); TILEPILOT_RANDPROG_ALL=1 turns the known-bug constructs on.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>

#include "RandomProgram.h"
#include "codegen/cpu/Interpreter.h"
#include "codegen/cuda/CudaKernel.h"
#include "ir/Verifier.h"
#include "ops/CudaCheck.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::testing;

namespace {

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

GenOptions gpu_options() {
  GenOptions o;
  if (env_int("TILEPILOT_RANDPROG_ALL", 0)) return o;
  o.frag_regions = false;         // TODO(issue 14 (a)): CUDA acts on the whole fragment
  o.narrow_wgmma_b = false;       // TODO(new): sm_90a gemm with N = 8 asserts in LowerGemm.cpp
  o.tile_atomic_edge = false;     // TODO(issue 14 (b)): interpreter throws, CUDA unguarded
  o.guarded_select_loads = false; // TODO(issue 14 (c)): interpreter evaluates both sides
  o.rank5 = false;                // TODO(issue 14 (d)): rank > 4 element access
  o.local_tiles = false;          // TODO(alloc_local): no shared layout for local tiles
  return o;
}

TEST(GpuRandomPrograms, InterpreterAndCudaAgreeElementByElement) {
  int64_t n = env_int("TILEPILOT_RANDPROG_SEEDS", 1000);
  int64_t start = env_int("TILEPILOT_RANDPROG_START", 0);
  GenOptions o = gpu_options();
  rt::ensure_context();
  std::string arch = ops::device_arch();
  int mismatches = 0, skipped = 0, ran = 0, errors = 0;
  std::map<std::string, int> skip_reasons;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = start; s < start + n; ++s) {
    uint64_t seed = static_cast<uint64_t>(s);
    RandomProgram p = make_random_program(seed, o);
    ir::verify(p.kernel.node());
    std::vector<HostTensor> want = make_args(p, seed), got = want;
    std::vector<HostTensor*> ptrs;
    for (HostTensor& h : want)
      ptrs.push_back(&h);
    cpu::InterpretOptions io;
    io.threads = 4;
    cpu::interpret(p.kernel, ptrs, io);
    std::vector<int> outs;
    for (size_t k = 0; k < p.args.size(); ++k)
      if (p.args[k].role != ArgSpec::Role::input) outs.push_back(static_cast<int>(k));
    try {
      cuda::CudaKernel ck(p.kernel, arch);
      ops::DeviceArgs d = ops::DeviceArgs::upload(got);
      try {
        ck.prepare(d.tensors);
      } catch (const UserError& e) {
        // A clean backend restriction (the CPU test bounds how often they happen).
        ++skipped;
        std::string m = e.what();
        ++skip_reasons[m.substr(0, std::min<size_t>(m.find('\n'), 100))];
        continue;
      }
      ck.launch(d.tensors);
      TILEPILOT_CU(rt::driver().cuCtxSynchronize());
      d.download(got, outs);
    } catch (const std::exception& e) {
      // A launch fault leaves the context unusable: report and stop.
      ADD_FAILURE() << "seed " << s << ": CUDA failed: " << e.what() << "\n" << describe(p);
      ++errors;
      break;
    }
    ++ran;
    std::string diff = compare_outputs(p, want, got);
    if (!diff.empty() && ++mismatches <= 10)
      ADD_FAILURE() << "seed " << s << ": " << diff << "\n" << describe(p);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "seeds [" << start << ", " << start + n << "): " << ran << " ran, " << mismatches
            << " mismatched, " << skipped << " rejected by lowering, " << errors << " CUDA errors, "
            << secs << " s (" << (ran ? secs / ran : 0) << " s each)\n";
  for (const auto& [m, c] : skip_reasons)
    std::cout << "  " << c << "x " << m << "\n";
  EXPECT_EQ(mismatches, 0);
  EXPECT_LE(skipped * 4, std::max<int64_t>(n, 1)) << "too many programs rejected by lowering";
}

} // namespace
