// bench_gemm: GEMM side by side with cuBLASLt, in one process, L2 flushed before every timed run.
// Shapes (issue 3): 8192^3, then M in {128, 1024, 4096, 16384} x (N, K) in {(4096, 4096),
// (6144, 4096), (28672, 4096), (4096, 14336)}; or the --shape list. "Ours" comes from the factory
// the CUDA backend registers (bench/Ours*.cpp); without one the reference is still timed.
//   bench_gemm [--dtype bf16|f16] [--layout nn|nt|tn] [--shape M=..,N=..,K=..]...
//              [--runs 50] [--warmup 10] [--check] [--json out.json]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <iostream>

#include "BenchHarness.h"
#include "ops/reference/GpuReference.h"
#include "ops/vendor/CublasLt.h"
#include "runtime/Driver.h"
#include "tilepilot/error.h"

using namespace tp;

namespace {

std::vector<std::map<std::string, std::string>> default_shapes() {
  std::vector<std::map<std::string, std::string>> out = {
      {{"M", "8192"}, {"N", "8192"}, {"K", "8192"}}};
  const std::pair<int, int> nk[] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
  for (int M : {128, 1024, 4096, 16384})
    for (auto [N, K] : nk)
      out.push_back({{"M", std::to_string(M)}, {"N", std::to_string(N)}, {"K", std::to_string(K)}});
  return out;
}

/// cuBLASLt's output against the fp32 GPU reference: max |error| and relative L2 error.
std::string check(ops::CublasLtGemm& lt, const ops::Problem& p, CUdeviceptr A, CUdeviceptr B,
                  CUdeviceptr C, CUstream s) {
  int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
  const std::string& layout = p.options.at("layout");
  rt::DeviceBuffer ref(size_t(M * N) * sizeof(float));
  lt.run(p, A, B, C, s);
  ops::gpu_reference_gemm(p.dtype, layout, M, N, K, A, B, ref.ptr(), s);
  TILEPILOT_CU(rt::driver().cuStreamSynchronize(s));
  std::vector<float> got = ops::download_as_f32(C, size_t(M * N), p.dtype);
  std::vector<float> want = ops::download_f32(ref.ptr(), size_t(M * N));
  double max_err = 0, num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double e = std::fabs(double(got[i]) - want[i]);
    max_err = std::isnan(e) ? INFINITY : std::max(max_err, e);
    num += e * e;
    den += double(want[i]) * want[i];
  }
  return fmt::format("cuBLASLt vs fp32 reference: max_abs_err {:.3g}, rel_l2_err {:.3g}", max_err,
                     std::sqrt(num / std::max(den, 1e-30)));
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"GEMM: ours vs cuBLASLt, L2 flushed, median of many runs"};
  std::string dtype_text = "bf16", layout = "nn", json_path;
  std::vector<std::string> shape_texts;
  bench::TimingOptions opt;
  bool do_check = false;
  app.add_option("--dtype", dtype_text, "bf16 or f16")->check(CLI::IsMember({"bf16", "f16"}));
  app.add_option("--layout", layout, "nn, nt or tn")->check(CLI::IsMember({"nn", "nt", "tn"}));
  app.add_option("--shape", shape_texts, "M=..,N=..,K=.. (repeatable; replaces the default set)");
  app.add_option("--runs", opt.runs, "timed runs per side");
  app.add_option("--warmup", opt.warmup, "untimed runs first");
  app.add_flag("--check", do_check, "compare cuBLASLt with the fp32 GPU reference first");
  app.add_option("--json", json_path, "write the records to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    DType dtype = *parse_dtype(dtype_text);
    std::vector<std::map<std::string, std::string>> shapes;
    for (const std::string& t : shape_texts)
      shapes.push_back(ops::parse_kv(t, "--shape"));
    if (shapes.empty()) shapes = default_shapes();
    const ops::Operator& gemm = ops::find_operator("gemm");
    bench::Harness harness(opt);
    std::string why;
    std::unique_ptr<ops::CublasLtGemm> lt;
    if (ops::cublaslt_available(&why)) lt = std::make_unique<ops::CublasLtGemm>();
    std::string ref_name = lt ? "cuBLASLt " + lt->library().version_text() : "cuBLASLt";
    std::cout << "bench_gemm: " << (lt ? lt->library().describe() : "cuBLASLt: " + why) << "\n";
    std::vector<bench::SideBySide> records;
    for (auto kv : shapes) {
      kv["layout"] = layout;
      ops::Problem p = gemm.parse(kv, dtype);
      bench::SideBySide r;
      r.op = "gemm";
      r.shape = p.shape_str();
      r.dtype = dtype_name(dtype);
      r.flops = gemm.flops(p);
      r.ref_name = ref_name;
      // Flushed: a run stopped at a time limit then shows the shape it was on.
      std::cout << p.shape_str() << std::endl;
      bench::time_ours(harness, p, r);
      if (lt) {
        int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
        rt::DeviceBuffer A(size_t(M * K) * 2), B(size_t(K * N) * 2), C(size_t(M * N) * 2);
        bench::fill_uniform(A.ptr(), size_t(M * K), dtype, 1, harness.stream());
        bench::fill_uniform(B.ptr(), size_t(K * N), dtype, 2, harness.stream());
        if (do_check)
          std::cout << "  " << check(*lt, p, A.ptr(), B.ptr(), C.ptr(), harness.stream()) << "\n";
        std::cout << "  cuBLASLt: " << lt->algorithm(dtype, layout, M, N, K) << "\n";
        r.ref = harness.time([&](CUstream s) { lt->run(p, A.ptr(), B.ptr(), C.ptr(), s); });
      } else {
        r.ref_note = "not available (" + why + ")";
      }
      records.push_back(r);
    }
    std::cout << "\n" << bench::format_table(records);
    if (!json_path.empty()) {
      bench::write_json(json_path, bench::report_json("gemm", opt, records));
      std::cout << "wrote " << json_path << "\n";
    }
  } catch (const tp::Error& e) {
    std::cerr << "bench_gemm: " << e.what() << "\n";
    return e.kind() == tp::Error::Kind::user ? 2 : 3;
  }
  return 0;
}
