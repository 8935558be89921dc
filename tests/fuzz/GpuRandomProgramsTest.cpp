// Random small tile programs on the GPU (ctest label gpu; issue 14 §2): each program runs on the
// interpreter and through the CUDA backend with the same random inputs and poisoned outputs,
// and every output element must agree (bit for bit, or within the program's tolerance when it
// uses exp2). A mismatch prints the seed, the first differing index and values and the program.
// Batches: TILEPILOT_RANDPROG_SEEDS (default 1000) programs from TILEPILOT_RANDPROG_START
// (default 0), every construct of the generator on. NVRTC (about
// 0.3-1 s a kernel) and the interpreter run on up to 16 threads, batch by batch, ahead of the
// launches, so 1000 programs should take one to two minutes on the H200's 16 cores.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>

#include "ProgramBatch.h"
#include "compile/CudaKernel.h"
#include "ops/CudaCheck.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::testing;

namespace {

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

TEST(GpuRandomPrograms, InterpreterAndCudaAgreeElementByElement) {
  int64_t n = env_int("TILEPILOT_RANDPROG_SEEDS", 1000);
  int64_t start = env_int("TILEPILOT_RANDPROG_START", 0);
  GenOptions o = gpu_options();
  rt::ensure_context();
  std::string arch = ops::device_arch();
  unsigned workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  int mismatches = 0, skipped = 0, ran = 0, errors = 0;
  std::map<std::string, int> skip_reasons, paths; // paths: of the programs that ran
  auto t0 = std::chrono::steady_clock::now();
  const int64_t batch = 4 * workers;
  bool dead = false;
  for (int64_t b0 = start; b0 < start + n && !dead; b0 += batch) {
    size_t count = static_cast<size_t>(std::min(batch, start + n - b0));
    std::vector<Job> jobs = prepare_batch(static_cast<uint64_t>(b0), count, o, arch, workers);
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
        std::string m = e.what();
        if (m.find("CUDA_ERROR_") != std::string::npos) {
          // A fault of this launch (reported as a user error by the driver wrapper) leaves the
          // context unusable: report it with its seed and stop.
          ADD_FAILURE() << "seed " << j.seed << ": CUDA failed: " << m << "\n" << describe(j.p);
          ++errors;
          dead = true;
          break;
        }
        // Checked before launching (arguments, resources): a backend restriction.
        ++skipped;
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
      for (const std::string& path : lowering_paths(j.lk))
        ++paths[path];
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
  std::cout << "lowering paths of the programs that ran:\n";
  for (const auto& [p, c] : paths)
    std::cout << "  " << p << " " << c << "\n";
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(errors, 0);
  EXPECT_LE(skipped * 4, std::max<int64_t>(n, 1)) << "too many programs rejected by lowering";
}

} // namespace
