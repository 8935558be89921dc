// `tilepilot show OP [--shape ...] [--config ...] [--stage ir|lowered|cuda|ptx|resources]`:
// the stage of every kernel the operator's program runs, in order.
#include <iostream>

#include "CliSupport.h"
#include "Commands.h"
#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ir/IRPrinter.h"
#include "ops/Operator.h"
#include "pilot/ConfigCheck.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"

namespace tp::cli {

void add_show_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("show", "print a stage of an operator's kernel");
  struct Args {
    std::string op, shape, config, stage = "ir", arch = "sm_90a", dtype = "bf16";
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("op", a->op, "operator")->required();
  cmd->add_option("--shape", a->shape, "problem keys (defaults fill the rest)");
  cmd->add_option("--config", a->config, "knobs");
  cmd->add_option("--stage", a->stage, "ir | lowered | cuda | ptx | resources");
  cmd->add_option("--arch", a->arch,
                  "sm_80 | sm_90a | sm_90a-notma (the variant for rows not 16-byte aligned)");
  cmd->add_option("--dtype", a->dtype, "bf16 | f16 | f32");
  cmd->callback([a, rc] {
    const ops::Operator& op = ops::find_operator(a->op);
    auto kv = ops::parse_kv(a->shape, "--shape");
    // Sizes are symbolic in the kernel; the operator's example fills the keys not given.
    for (const auto& [k, v] : op.example_shape())
      kv.try_emplace(k, v);
    ops::Problem p = op.parse(kv, parse_dtype_or_fail(a->dtype));
    const passes::Target target = passes::Target::parse(a->arch);
    if (a->stage != "ir" && a->stage != "lowered" && a->stage != "cuda" && a->stage != "ptx" &&
        a->stage != "resources")
      user_error() << "unknown --stage '" << a->stage
                   << "'; use ir, lowered, cuda, ptx or resources";
    // Knobs the flag leaves out come from the default config for the target arch.
    const ops::Config c = ops::complete_config(op, p, target.arch, ops::parse_config(a->config));
    // Knobs the arch lacks and problems without a GPU kernel are refused before lowering
    // (NVRTC's log would bury the reason).
    if (pilot::arch_problem(target.arch).empty())
      if (std::string why = pilot::config_problem(op, p, target.arch, c); !why.empty())
        user_error() << "show: " << why;
    // A program of several kernels prints each step, headed by its index and kernel name.
    const ops::KernelProgram prog = ops::checked_program(op, p, c);
    for (size_t s = 0; s < prog.steps.size(); ++s) {
      const Kernel& k = prog.steps[s].kernel;
      if (prog.steps.size() > 1)
        std::cout << (s ? "\n" : "") << "// ===== step " << s << " of " << prog.steps.size() << ": "
                  << k->name << " =====\n";
      if (a->stage == "ir") {
        std::cout << ir::to_string(k.node());
      } else if (a->stage == "lowered" || a->stage == "cuda" || a->stage == "ptx" ||
                 a->stage == "resources") {
        // The variant a launch at this shape takes (no TMA for unaligned rows, paired stores
        // without alignment tests for even ones), as CudaKernel picks it.
        std::vector<ir::ArgDesc> descs;
        for (const ops::ArgSpec& spec : ops::step_arg_specs(prog, s, op.arg_specs(p)))
          descs.push_back({spec.dtype, spec.shape});
        cuda::LoweredKernel lk = cuda::lower_for_shapes(k, target, descs);
        if (a->stage == "lowered") {
          std::cout << lk.lowered_text;
        } else if (a->stage == "cuda") {
          std::cout << lk.source;
        } else {
          rt::JitKernel j =
              rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, target.arch, {});
          if (a->stage == "ptx") {
            std::cout << j.compiled.ptx;
          } else {
            rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
            std::cout << "entry: " << lk.entry << " (" << a->arch << ")\n"
                      << "threads per block: " << lk.block_threads << "\n"
                      << "dynamic shared memory: " << lk.smem_bytes << " bytes\n"
                      << "registers: " << u.registers << "\n"
                      << "spill stores: " << u.spill_store_bytes
                      << " bytes, spill loads: " << u.spill_load_bytes << " bytes\n"
                      << "stack frame: " << u.stack_bytes << " bytes\n"
                      << "wgmma serialized by ptxas: " << (u.wgmma_serialized ? "yes" : "no")
                      << "\n"
                      << "wgmma fences injected by ptxas: " << u.wgmma_fences_injected << "\n"
                      << "nvrtc: " << j.compiled.seconds << " s" << (j.cache_hit ? " (cached)" : "")
                      << "\n";
          }
        }
      } else {
        user_error() << "unknown --stage '" << a->stage
                     << "'; use ir, lowered, cuda, ptx or resources";
      }
    }
    *rc = 0;
  });
}

} // namespace tp::cli
