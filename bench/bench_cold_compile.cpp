// bench_cold_compile: where a true cold compile of an operator's default kernel spends its time.
// No GPU is needed: each run calls NVRTC directly (no TilePilot cache; NVRTC's own cache is off,
// see runtime/Nvrtc.cpp) and checks ptxas' resource report to prove that ptxas ran.
// Columns, medians over --runs, wall and process CPU seconds (CPU is steadier on a shared host):
//   full     -arch=<arch>: front end + NVVM + ptxas (what a cold jit_load pays)
//   ptx      -arch=compute_<arch>: front end + NVVM only; ptxas = full - ptx
//   prelude  an empty kernel that includes the device library as a generated kernel without a
//            gemm does, asking for no wgmma wrappers (header parsing + NVRTC startup)
//   wgmma    the same with every wgmma wrapper (what each kernel parsed before the device
//            library compiled only the widths a kernel asks for)
//   builtin  an empty kernel without it (NVRTC's own builtin prelude + startup)
//   bench_cold_compile [--op gemm --op attention --op rmsnorm] [--arch sm_90a] [--runs 5]
//                      [--shape M=8192,N=8192,K=8192] [--dump DIR]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <iostream>
#include <regex>
#include <set>
#include <sys/resource.h>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/Operator.h"
#include "runtime/DeviceHeaders.h"
#include "runtime/Nvrtc.h"
#include "runtime/ResourceUsage.h"
#include "tilepilot/error.h"

using namespace tp;

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Timing {
  double wall = 0, cpu = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Medians of `runs` calls of `compile`.
Timing measure(int runs, const std::function<void()>& compile) {
  std::vector<double> wall, cpu;
  for (int i = 0; i < runs; ++i) {
    double c0 = cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    compile();
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(cpu_seconds() - c0);
  }
  return {median(wall), median(cpu)};
}

/// The device headers `source` reaches through #include (every branch of an #if counts), and
/// their total line count.
std::pair<int, int> headers_reached(const std::string& source) {
  std::map<std::string, const std::string*> by_name;
  for (const auto& [name, text] : rt::device_headers())
    by_name[name] = &text;
  const std::regex include(R"(#include\s+"([^"]+)\")");
  std::set<std::string> seen;
  std::vector<const std::string*> todo{&source};
  int lines = 0;
  while (!todo.empty()) {
    const std::string* text = todo.back();
    todo.pop_back();
    for (std::sregex_iterator it(text->begin(), text->end(), include), end; it != end; ++it) {
      std::string name = (*it)[1];
      auto h = by_name.find(name);
      if (h == by_name.end() || !seen.insert(name).second) continue;
      lines += int(std::count(h->second->begin(), h->second->end(), '\n'));
      todo.push_back(h->second);
    }
  }
  return {int(seen.size()), lines};
}

/// The operator's default kernel (its first step) for `arch` at `shape` (its example shape
/// when empty), in the variant a launch at that shape compiles.
cuda::LoweredKernel default_kernel(const std::string& op_name, const std::string& arch,
                                   const std::string& shape) {
  const ops::Operator& op = ops::find_operator(op_name);
  ops::Problem p =
      op.parse(shape.empty() ? op.example_shape() : ops::parse_kv(shape, "--shape"), DType::bf16);
  ops::Config c = ops::complete_config(op, p, arch, {});
  const ops::KernelProgram prog = ops::checked_program(op, p, c);
  std::vector<ir::ArgDesc> descs;
  for (const ops::ArgSpec& a : ops::step_arg_specs(prog, 0, op.arg_specs(p)))
    descs.push_back({a.dtype, a.shape});
  return cuda::lower_for_shapes(prog.steps[0].kernel, passes::Target::parse(arch), descs);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"cold NVRTC compile of operators' default kernels, split by phase"};
  std::vector<std::string> op_names{"gemm", "attention", "rmsnorm"};
  std::string arch = "sm_90a";
  int runs = 5;
  std::string shape, dump;
  app.add_option("--op", op_names, "operators (default: gemm attention rmsnorm)");
  app.add_option("--shape", shape, "k=v,... for every --op (default: each one's example shape)");
  app.add_option("--dump", dump, "write each kernel's CUDA source to DIR/<op>.cu");
  app.add_option("--arch", arch, "a real arch, sm_XX[a]");
  app.add_option("--runs", runs, "compiles per column; the median is printed")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    if (arch.rfind("sm_", 0) != 0)
      user_error() << "--arch " << arch << ": give a real arch such as sm_90a (ptxas runs for it)";
    const std::string virtual_arch = "compute_" + arch.substr(3);
    std::string opts;
    for (const std::string& o : rt::nvrtc_effective_options(arch, {}))
      opts += " " + o;
    fmt::print("NVRTC {} ({}), arch {}, median of {} runs; options:{}\n", rt::nvrtc_version(),
               rt::nvrtc_library_path(), arch, runs, opts);
    const std::string empty_kernel = "extern \"C\" __global__ void tp_empty() {}\n";
    Timing builtin = measure(runs, [&] { rt::nvrtc_compile(empty_kernel, "b", virtual_arch, {}); });
    Timing prelude = measure(runs, [&] {
      rt::nvrtc_compile("#define TP_WGMMA_N_LIST 1\n#include \"tilepilot_device.cuh\"\n" +
                            empty_kernel,
                        "p", virtual_arch, {});
    });
    Timing wgmma = measure(runs, [&] {
      rt::nvrtc_compile("#include \"tilepilot_device.cuh\"\n" + empty_kernel, "w", virtual_arch,
                        {});
    });
    fmt::print("{:<12} {:>6} {:>12} {:>15} {:>15} {:>15} {:>15} {:>15} {:>15}\n", "op", "lines",
               "headers", "full s", "ptx s", "ptxas s", "prelude s", "wgmma s", "builtin s");
    fmt::print("{:<12} {:>6} {:>12} {:>15} {:>15} {:>15} {:>15} {:>15} {:>15}\n", "", "", "(lines)",
               "wall/cpu", "wall/cpu", "wall/cpu", "wall/cpu", "wall/cpu", "wall/cpu");
    auto pair = [](double w, double c) { return fmt::format("{:.3f}/{:.3f}", w, c); };
    for (const std::string& name : op_names) {
      cuda::LoweredKernel lk = default_kernel(name, arch, shape);
      if (!dump.empty()) std::ofstream(dump + "/" + name + ".cu") << lk.source;
      int registers = -1;
      Timing full = measure(runs, [&] {
        rt::CompileOutput out = rt::nvrtc_compile(lk.source, lk.entry, arch, {});
        registers = rt::resource_usage(out.log, lk.entry).registers;
      });
      // Without ptxas' report the compile was served from a cache and the numbers lie.
      if (registers <= 0)
        user_error() << name << ": ptxas reported no registers for " << lk.entry
                     << "; this was not a cold compile (is CUDA_CACHE_DISABLE=0 set?)";
      Timing ptx = measure(runs, [&] { rt::nvrtc_compile(lk.source, lk.entry, virtual_arch, {}); });
      auto [headers, header_lines] = headers_reached(lk.source);
      int lines = int(std::count(lk.source.begin(), lk.source.end(), '\n'));
      fmt::print("{:<12} {:>6} {:>12} {:>15} {:>15} {:>15} {:>15} {:>15} {:>15}\n", name, lines,
                 fmt::format("{} ({})", headers, header_lines), pair(full.wall, full.cpu),
                 pair(ptx.wall, ptx.cpu), pair(full.wall - ptx.wall, full.cpu - ptx.cpu),
                 pair(prelude.wall, prelude.cpu), pair(wgmma.wall, wgmma.cpu),
                 pair(builtin.wall, builtin.cpu));
    }
  } catch (const UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
