// See ProgramBatch.h.
#include "ProgramBatch.h"
#include "compile/Lower.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "codegen/cpu/Interpreter.h"
#include "ir/Verifier.h"
#include "runtime/Jit.h"

namespace tp::testing {

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

std::vector<std::string> lowering_paths(const cuda::LoweredKernel& lk) {
  static const char* const kCalls[] = {
      "tp::cg::copy16(",          "tp::cg::copy16_unaligned",     "tp::cg::st16_taken",
      "tp::cg::ld_issue",         "tp::cg::st_block_from_shared", "atomic_add2_aligned",
      "tp::sm80::cp_async_chunk", "tp::sm90::tma_load",           "mbarrier_wait_parity"};
  std::vector<std::string> out;
  for (const char* c : kCalls)
    if (lk.source.find(c) != std::string::npos) out.push_back(c);
  if (lk.lowered_text.find("swizzled for its accesses") != std::string::npos)
    out.push_back("a shared tile swizzled for its accesses");
  return out;
}

namespace {

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

} // namespace

GenOptions gpu_options() {
  return GenOptions{}; // every construct: the known bugs the generator found are fixed
}

std::vector<Job> prepare_batch(uint64_t start, size_t n, const GenOptions& o,
                               const std::string& arch, unsigned workers) {
  std::vector<Job> jobs(n);
  for (size_t k = 0; k < n; ++k) {
    Job& j = jobs[k];
    j.seed = start + k;
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
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < std::max(1u, workers); ++w)
    pool.emplace_back([&] {
      for (size_t k; (k = next++) < jobs.size();)
        if (jobs[k].failure.empty()) prepare_on_worker(jobs[k], arch);
    });
  for (std::thread& t : pool)
    t.join();
  return jobs;
}

} // namespace tp::testing
