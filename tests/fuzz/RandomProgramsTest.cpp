// Random small tile programs on the CPU (issue 14 §2, issue 18 §4): every program the generator
// builds passes the verifier, runs on the interpreter and lowers for CUDA (sm_90a with and
// without TMA, sm_80) with no internal error, no crash and no raw exception. A program the
// builder or the interpreter rejects is a generator bug; a clean UserError from CUDA lowering is
// a documented backend restriction (counted and printed, and bounded). A sample compiles
// through NVRTC.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>

#include "ProgramBatch.h"
#include "RandomProgram.h"
#include "codegen/cpu/Interpreter.h"
#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ir/Verifier.h"
#include "runtime/Jit.h"

using namespace tp;
using namespace tp::testing;

namespace {

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

/// Options for the CPU side: every construct is on (the issue 14 (a)-(e), alloc_local and
/// narrow-wgmma fixes landed).
GenOptions cpu_options() {
  return GenOptions{};
}

/// A message with its specifics (names in quotes, layouts in parentheses, indices in brackets)
/// blanked, so that messages of one rule group together.
std::string rule_of(const std::string& m) {
  std::string out;
  char close = 0;
  for (size_t i = 0; i < m.size() && m[i] != '\n'; ++i) {
    char c = m[i];
    if (close) {
      if (c == close) close = 0, out += c;
      continue;
    }
    out += c;
    if (c == '\'') close = '\'';
    if (c == '(') close = ')';
    if (c == '[') close = ']';
  }
  return out.size() > 160 ? out.substr(0, 160) + "..." : out;
}

struct Outcome {
  std::string failure;                 // a property violation, empty when none
  std::vector<std::string> rejections; // clean UserErrors of CUDA lowering, per target
  std::vector<cuda::LoweredKernel> lowered;
};

/// Runs `f`; an exception is a failure "<stage>: <kind>: <what>", except a UserError when
/// `user_ok` (then returned through `rejected`).
template <typename F>
std::string guarded(const char* stage, bool user_ok, std::string* rejected, F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    if (user_ok) {
      *rejected = e.what();
      return "";
    }
    return std::string(stage) + ": user error: " + e.what();
  } catch (const InternalError& e) {
    return std::string(stage) + ": internal error: " + e.what();
  } catch (const std::exception& e) {
    return std::string(stage) + ": raw exception: " + e.what();
  }
  return "";
}

Outcome check_program(uint64_t seed, const GenOptions& o, RandomProgram* out) {
  Outcome r;
  RandomProgram& p = *out;
  std::string unused;
  r.failure = guarded("builder", false, &unused, [&] { p = make_random_program(seed, o); });
  if (!r.failure.empty()) return r;
  r.failure = guarded("verifier", false, &unused, [&] { ir::verify(p.kernel.node()); });
  if (!r.failure.empty()) return r;
  std::string inexact;
  r.failure = guarded("interpreter", false, &unused, [&] {
    std::vector<HostTensor> args = make_args(p, seed);
    std::vector<HostTensor*> ptrs;
    for (HostTensor& h : args)
      ptrs.push_back(&h);
    cpu::InterpretOptions io;
    io.threads = 1;
    cpu::interpret(p.kernel, ptrs, io);
    // The generator's promise that makes the GPU comparison exact: every output value is
    // finite and an integer below 2^24 (or within its tolerance when exp2 was used).
    for (size_t k = 0; k < args.size() && inexact.empty(); ++k) {
      if (p.args[k].role == ArgSpec::Role::input) continue;
      for (int64_t i = 0; i < args[k].numel(); ++i) {
        double v = args[k].get(i);
        if (std::isnan(v) || (args[k].dtype() == DType::i32 && v == INT32_MIN)) continue;
        bool ok = std::isfinite(v) && std::abs(v) < (1 << 24) && (p.atol > 0 || v == std::trunc(v));
        if (!ok) {
          inexact = "generator: output '" + p.args[k].name + "' holds " + std::to_string(v) +
                    " at flat index " + std::to_string(i) + ", not a small exact value";
          break;
        }
      }
    }
  });
  if (r.failure.empty()) r.failure = inexact;
  if (!r.failure.empty()) return r;
  for (const char* arch : {"sm_90a", "sm_90a-notma", "sm_80"}) {
    passes::Target t = passes::Target::parse(std::string(arch).substr(0, 6));
    t.allow_tma = std::string(arch) != "sm_90a-notma";
    std::string rejected;
    r.failure = guarded((std::string("lower ") + arch).c_str(), true, &rejected,
                        [&] { r.lowered.push_back(cuda::lower_kernel(p.kernel, t)); });
    if (!r.failure.empty()) return r;
    if (!rejected.empty()) r.rejections.push_back(std::string(arch) + ": " + rejected);
  }
  return r;
}

// The property over many seeds; failures print the seed and the program.
TEST(RandomPrograms, VerifyInterpretAndLowerWithoutInternalErrors) {
  int64_t n = env_int("TILEPILOT_RANDPROG_CPU_SEEDS", 1000);
  int64_t start = env_int("TILEPILOT_RANDPROG_START", 0);
  GenOptions o = cpu_options();
  std::map<std::string, int> rejections, features, paths;
  std::map<std::string, std::vector<int64_t>> failed; // by message: the seeds
  int failures = 0, lowered = 0, with_rejection = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = start; s < start + n; ++s) {
    RandomProgram p;
    Outcome r = check_program(static_cast<uint64_t>(s), o, &p);
    for (const std::string& f : p.features)
      ++features[f];
    if (!r.failure.empty()) {
      ++failures;
      failed[rule_of(r.failure)].push_back(s);
      if (failures <= 8)
        ADD_FAILURE() << "seed " << s << ": " << r.failure << "\n"
                      << (p.kernel.defined() ? describe(p) : std::string("(not built)"));
      continue;
    }
    lowered += !p.uses("local");
    // Which lowering paths the programs reach, per target variant (a path no program reaches is
    // one the GPU comparison never checks).
    for (const cuda::LoweredKernel& lk : r.lowered)
      for (const std::string& path : lowering_paths(lk))
        ++paths[lk.target.str() + " " + path];
    if (!r.rejections.empty()) ++with_rejection;
    for (const std::string& m : r.rejections)
      ++rejections[rule_of(m)];
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << n << " programs in " << secs << " s; " << failures << " failed; " << lowered
            << " lowered for CUDA, " << with_rejection << " of them rejected by a target:\n";
  for (const auto& [m, c] : rejections)
    std::cout << "  " << c << "x " << m << "\n";
  for (const auto& [m, seeds] : failed) {
    std::cout << "FAILED " << seeds.size() << "x " << m << "\n  seeds:";
    for (int64_t s : seeds)
      std::cout << " " << s;
    std::cout << "\n";
  }
  std::cout << "features:";
  for (const auto& [f, c] : features)
    std::cout << " " << f << "=" << c;
  std::cout << "\nlowering paths (programs whose CUDA calls them):";
  for (const auto& [f, c] : paths)
    std::cout << "\n  " << f << " " << c;
  std::cout << "\n";
  EXPECT_EQ(failures, 0) << "see the seeds above; rerun one with TILEPILOT_RANDPROG_START=<seed> "
                            "TILEPILOT_RANDPROG_CPU_SEEDS=1";
  // Clean rejections are backend restrictions, but a generator producing mostly rejected
  // programs tests little: keep them a minority.
  EXPECT_LE(with_rejection * 4, std::max(lowered, 1)) << "too many programs rejected by lowering";
}

// Not a check: prints the program of seed TILEPILOT_RANDPROG_START and the CUDA the GPU test
// launches for it on sm_90a, for a seed a GPU run reported. Run with
// --gtest_also_run_disabled_tests --gtest_filter='*ShowOneSeed'.
TEST(RandomPrograms, DISABLED_ShowOneSeed) {
  RandomProgram p = make_random_program(
      static_cast<uint64_t>(env_int("TILEPILOT_RANDPROG_START", 0)), gpu_options());
  std::cout << describe(p) << "\n" << lower_for_launch(p, "sm_90a").source << "\n";
}

// The generator is a function of the seed: the same seed gives the same program text.
TEST(RandomPrograms, SameSeedSameProgram) {
  for (uint64_t s : {1ull, 17ull, 12345ull}) {
    RandomProgram a = make_random_program(s), b = make_random_program(s);
    EXPECT_EQ(describe(a), describe(b)) << "seed " << s;
  }
  EXPECT_NE(describe(make_random_program(1)), describe(make_random_program(2)));
}

// The mix reaches every construct the generator claims: over a few hundred seeds each of these
// appears at least once (a generator that silently stopped making gemms would test nothing).
TEST(RandomPrograms, CoverEveryConstruct) {
  std::map<std::string, int> seen;
  for (uint64_t s = 0; s < 300; ++s) {
    RandomProgram p = make_random_program(s);
    for (const std::string& f : p.features)
      ++seen[f];
  }
  for (const char* f : {"shared",
                        "fragment",
                        "local",
                        "tile3d",
                        "copy_global_to_shared",
                        "copy_global_to_fragment",
                        "copy_global_region",
                        "copy_shared_to_fragment",
                        "copy_fragment_to_shared",
                        "copy_convert",
                        "parallel_1d",
                        "parallel_2d",
                        "parallel_3d",
                        "exp2",
                        "cast_bf16",
                        "cast_f16",
                        "cast_i32",
                        "select",
                        "select_on_data",
                        "guarded_select_load",
                        "global_load",
                        "reduce_max_shared",
                        "reduce_sum_fragment",
                        "gemm_bf16_shared_shared",
                        "gemm_f16_fragment_shared",
                        "gemm_f32_shared_shared",
                        "fill",
                        "fill_region",
                        "if",
                        "if_else",
                        "if_in_parallel",
                        "serial",
                        "unrolled",
                        "pipelined",
                        "atomic_elem",
                        "atomic_tile",
                        "pipelined_gemm",
                        "pipelined_gemm_tiles_inside",
                        "atomic_shared",
                        "local_store",
                        "local_read",
                        "frag_region_store",
                        "region_store",
                        "elem_store",
                        "store_from_fragment",
                        "store_from_shared",
                        "rank5"})
    EXPECT_GT(seen[f], 0) << "no program in 300 seeds uses " << f;
}

// A sample of lowered programs compiles through NVRTC for sm_90a and sm_80 (no GPU needed).
TEST(RandomPrograms, SampleCompilesThroughNvrtc) {
  GenOptions o = cpu_options();
  int compiled = 0;
  for (uint64_t s = 0; s < 200 && compiled < 6; s += 7) {
    RandomProgram p;
    Outcome r = check_program(s, o, &p);
    ASSERT_TRUE(r.failure.empty()) << "seed " << s << ": " << r.failure << "\n" << describe(p);
    if (r.lowered.size() != 3) continue;
    for (size_t v : {0u, 2u}) {
      const cuda::LoweredKernel& lk = r.lowered[v];
      rt::JitKernel j;
      try {
        j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, lk.target.arch, {});
      } catch (const std::exception& e) {
        ADD_FAILURE() << "seed " << s << " " << lk.target.str() << ": " << e.what() << "\n"
                      << describe(p);
        continue;
      }
      EXPECT_FALSE(j.compiled.cubin.empty()) << "seed " << s;
    }
    ++compiled;
  }
  EXPECT_GE(compiled, 3);
}

// The GPU suite's path up to the launch, on two threads: programs with the GPU options build,
// lower for sm_90a, compile through NVRTC and run on the interpreter, and the interpreter writes
// some output element of most of them (a program writing nothing compares nothing).
TEST(RandomPrograms, GpuBatchPreparesWithoutALaunch) {
  std::vector<Job> jobs = prepare_batch(0, 12, gpu_options(), "sm_90a", 2);
  int written = 0;
  for (const Job& j : jobs) {
    EXPECT_TRUE(j.failure.empty()) << "seed " << j.seed << ": " << j.failure << "\n"
                                   << describe(j.p);
    if (!j.failure.empty() || !j.rejected.empty()) continue;
    EXPECT_FALSE(j.lk.source.empty()) << "seed " << j.seed;
    bool any = false;
    for (size_t k = 0; k < j.p.args.size(); ++k)
      if (j.p.args[k].role == ArgSpec::Role::output)
        for (int64_t i = 0; i < j.want[k].numel() && !any; ++i)
          any = j.want[k].get(i) == j.want[k].get(i) && j.want[k].get(i) != INT32_MIN;
    written += any;
  }
  EXPECT_GE(written, 8) << "most programs should write some output element";
}

} // namespace
