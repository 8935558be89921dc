// Random small tile programs on the GPU (ctest label gpu; issue 14 §2): each program runs on the
// interpreter and through the CUDA backend with the same random inputs and poisoned outputs,
// and every output element must agree (bit for bit, or within the program's tolerance when it
// uses exp2). A mismatch prints the seed, the first differing index and values and the program.
// Batches: TILEPILOT_RANDPROG_SEEDS (default 1000) programs from TILEPILOT_RANDPROG_START
// (default 0); TILEPILOT_RANDPROG_ALL=1 turns the known-bug constructs on. NVRTC (about
// 0.3-1 s a kernel) and the interpreter run on up to 16 threads, batch by batch, ahead of the
// launches, so 1000 programs should take one to two minutes on the H200's 16 cores.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "RandomProgram.h"
#include "codegen/cpu/Interpreter.h"
#include "codegen/cuda/CudaKernel.h"
#include "ir/Verifier.h"
#include "ops/CudaCheck.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"

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

/// One program of a batch: built and lowered on the main thread, then compiled (into the kernel
/// cache) and interpreted on a worker, then launched on the main thread.
struct Job {
  uint64_t seed = 0;
  RandomProgram p;
  std::vector<HostTensor> init, want;
  cuda::LoweredKernel lk; // the variant CudaKernel will pick for these arguments
  std::string rejected;   // a UserError of lowering: a backend restriction, skipped
  std::string failure;    // anything else, before the launch
};

/// The variant CudaKernel::launch picks: TMA unless a TMA-loaded tensor's rows are not 16-byte
/// multiples (device buffers are 256-byte aligned).
cuda::LoweredKernel lower_for_launch(const RandomProgram& p, const std::string& arch) {
  passes::Target t = passes::Target::parse(arch);
  cuda::LoweredKernel lk = cuda::lower_kernel(p.kernel, t);
  for (const cuda::TmaParam& tp : lk.tmas) {
    const ArgSpec& a = p.args.at(static_cast<size_t>(tp.param));
    if (a.shape.back() * dtype_bytes(a.dtype) % 16 != 0) {
      t.allow_tma = false;
      return cuda::lower_kernel(p.kernel, t);
    }
  }
  return lk;
}

void prepare_on_worker(Job& j, const std::string& arch) {
  try {
    if (j.rejected.empty())
      rt::jit_compile_only(j.lk.source, j.lk.entry, j.lk.canonical_ir, arch, {});
    j.want = j.init;
    std::vector<HostTensor*> ptrs;
    for (HostTensor& h : j.want)
      ptrs.push_back(&h);
    cpu::InterpretOptions io;
    io.threads = 1;
    cpu::interpret(j.p.kernel, ptrs, io);
  } catch (const std::exception& e) {
    j.failure = std::string("before launch: ") + e.what();
  }
}

TEST(GpuRandomPrograms, InterpreterAndCudaAgreeElementByElement) {
  int64_t n = env_int("TILEPILOT_RANDPROG_SEEDS", 1000);
  int64_t start = env_int("TILEPILOT_RANDPROG_START", 0);
  GenOptions o = gpu_options();
  rt::ensure_context();
  std::string arch = ops::device_arch();
  unsigned workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  int mismatches = 0, skipped = 0, ran = 0, errors = 0;
  std::map<std::string, int> skip_reasons;
  auto t0 = std::chrono::steady_clock::now();
  const int64_t batch = 4 * workers;
  bool dead = false;
  for (int64_t b0 = start; b0 < start + n && !dead; b0 += batch) {
    std::vector<Job> jobs(static_cast<size_t>(std::min(batch, start + n - b0)));
    for (size_t k = 0; k < jobs.size(); ++k) {
      Job& j = jobs[k];
      j.seed = static_cast<uint64_t>(b0) + k;
      try {
        j.p = make_random_program(j.seed, o);
        ir::verify(j.p.kernel.node());
        j.init = make_args(j.p, j.seed);
        j.lk = lower_for_launch(j.p, arch);
      } catch (const UserError& e) {
        if (!j.p.kernel.defined() || j.init.empty())
          j.failure = std::string("generator: ") + e.what();
        else
          j.rejected = e.what();
      } catch (const std::exception& e) {
        j.failure = std::string("build or lower: ") + e.what();
      }
    }
    // NVRTC and the interpreter on all cores; the launches stay on this thread.
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < workers; ++w)
      pool.emplace_back([&] {
        for (size_t k; (k = next++) < jobs.size();)
          if (jobs[k].failure.empty()) prepare_on_worker(jobs[k], arch);
      });
    for (std::thread& t : pool)
      t.join();
    for (Job& j : jobs) {
      if (!j.failure.empty()) {
        ADD_FAILURE() << "seed " << j.seed << ": " << j.failure << "\n"
                      << (j.p.kernel.defined() ? describe(j.p) : std::string());
        ++errors;
        continue;
      }
      if (!j.rejected.empty()) {
        // A clean backend restriction (the CPU test bounds how often they happen).
        ++skipped;
        ++skip_reasons[j.rejected.substr(0, std::min<size_t>(j.rejected.find('\n'), 100))];
        continue;
      }
      std::vector<HostTensor> got = j.init;
      std::vector<int> outs;
      for (size_t k = 0; k < j.p.args.size(); ++k)
        if (j.p.args[k].role != ArgSpec::Role::input) outs.push_back(static_cast<int>(k));
      try {
        cuda::CudaKernel ck(j.p.kernel, arch);
        ops::DeviceArgs d = ops::DeviceArgs::upload(got);
        ck.launch(d.tensors);
        TILEPILOT_CU(rt::driver().cuCtxSynchronize());
        d.download(got, outs);
      } catch (const UserError& e) {
        // Checked before launching (arguments, resources): a backend restriction.
        ++skipped;
        std::string m = e.what();
        ++skip_reasons[m.substr(0, std::min<size_t>(m.find('\n'), 100))];
        continue;
      } catch (const std::exception& e) {
        // A launch fault leaves the context unusable: report and stop.
        ADD_FAILURE() << "seed " << j.seed << ": CUDA failed: " << e.what() << "\n"
                      << describe(j.p);
        ++errors;
        dead = true;
        break;
      }
      ++ran;
      std::string diff = compare_outputs(j.p, j.want, got);
      if (!diff.empty() && ++mismatches <= 10)
        ADD_FAILURE() << "seed " << j.seed << ": " << diff << "\n" << describe(j.p);
      if (!diff.empty()) std::cout << "MISMATCH seed " << j.seed << ": " << diff << "\n";
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "seeds [" << start << ", " << start + n << "): " << ran << " ran, " << mismatches
            << " mismatched, " << skipped << " rejected by lowering, " << errors << " errors, "
            << secs << " s (" << workers << " compile threads)\n";
  for (const auto& [m, c] : skip_reasons)
    std::cout << "  " << c << "x " << m << "\n";
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(errors, 0);
  EXPECT_LE(skipped * 4, std::max<int64_t>(n, 1)) << "too many programs rejected by lowering";
}

} // namespace
