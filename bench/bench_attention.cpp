// bench_attention: attention forward side by side with cuDNN's fused attention, in one process,
// L2 flushed before every timed run. Shapes (issue 4): D in {64, 128}, causal 0/1,
// S in {512, 1k, 2k, 4k, 8k, 16k} with B x S = 16k tokens and H x D = 2048; or the --shape list.
// Without cuDNN (or for a combination it does not run) the unfused fp32 GPU reference is timed
// instead, and the record says so. "Ours" comes from bench/Ours*.cpp when the backend provides it.
//   bench_attention [--dtype bf16|f16] [--shape B=..,H=..,S=..,D=..[,causal=1]]...
//                   [--runs 50] [--warmup 10] [--check] [--json out.json]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <iostream>

#include "BenchHarness.h"
#include "ops/attention/AttentionOp.h"
#include "ops/reference/GpuReference.h"
#include "ops/vendor/CudnnAttention.h"
#include "runtime/Driver.h"
#include "tilepilot/error.h"

using namespace tp;

namespace {

std::vector<std::map<std::string, std::string>> default_shapes() {
  std::vector<std::map<std::string, std::string>> out;
  for (int D : {64, 128})
    for (int causal : {0, 1})
      for (int S : {512, 1024, 2048, 4096, 8192, 16384})
        out.push_back({{"B", std::to_string(16384 / S)},
                       {"H", std::to_string(2048 / D)},
                       {"S", std::to_string(S)},
                       {"D", std::to_string(D)},
                       {"causal", std::to_string(causal)}});
  return out;
}

struct Buffers {
  rt::DeviceBuffer q, k, v, o, lse, lens;
  ops::AttentionPtrs ptrs() const {
    return {q.ptr(),
            k.ptr(),
            v.ptr(),
            o.ptr(),
            lse.bytes() ? lse.ptr() : 0,
            lens.bytes() ? lens.ptr() : 0};
  }
};

Buffers make_buffers(const ops::Problem& p, const ops::AttentionDesc& d, CUstream s) {
  size_t nq = size_t(d.B * d.H * d.S * d.D), nkv = size_t(d.B * d.Hkv * d.Skv * d.D);
  Buffers b;
  b.q = rt::DeviceBuffer(nq * 2);
  b.k = rt::DeviceBuffer(nkv * 2);
  b.v = rt::DeviceBuffer(nkv * 2);
  b.o = rt::DeviceBuffer(nq * 2);
  bench::fill_uniform(b.q.ptr(), nq, d.dtype, 1, s);
  bench::fill_uniform(b.k.ptr(), nkv, d.dtype, 2, s);
  bench::fill_uniform(b.v.ptr(), nkv, d.dtype, 3, s);
  if (d.lse) b.lse = rt::DeviceBuffer(size_t(d.B * d.H * d.S) * 4);
  if (d.lens) {
    std::vector<int32_t> L;
    for (int64_t x : ops::AttentionOp::key_lengths(p))
      L.push_back(static_cast<int32_t>(x));
    b.lens = rt::DeviceBuffer::from(L);
  }
  return b;
}

/// cuDNN's O against the fp32 GPU reference: max |error| and relative L2 error.
std::string check(ops::CudnnAttention& dnn, const ops::AttentionDesc& d, Buffers& b, CUstream s) {
  size_t n = size_t(d.B * d.H * d.S * d.D);
  rt::DeviceBuffer ref(n * 4);
  ops::AttentionPtrs rp = b.ptrs();
  rp.o = ref.ptr();
  rp.lse = 0;
  ops::AttentionDesc rd = d;
  rd.lse = false;
  dnn.run(d, b.ptrs(), s);
  ops::gpu_reference_attention(rd, rp, s);
  TILEPILOT_CU(rt::driver().cuStreamSynchronize(s));
  std::vector<float> got = ops::download_as_f32(b.o.ptr(), n, d.dtype);
  std::vector<float> want = ops::download_f32(ref.ptr(), n);
  double max_err = 0, num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    double e = std::fabs(double(got[i]) - want[i]);
    max_err = std::isnan(e) ? INFINITY : std::max(max_err, e);
    num += e * e;
    den += double(want[i]) * want[i];
  }
  return fmt::format("cuDNN vs fp32 reference: max_abs_err {:.3g}, rel_l2_err {:.3g}", max_err,
                     std::sqrt(num / std::max(den, 1e-30)));
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Attention forward: ours vs cuDNN, L2 flushed, median of many runs"};
  std::string dtype_text = "bf16", json_path;
  std::vector<std::string> shape_texts;
  bench::TimingOptions opt;
  bool do_check = false;
  app.add_option("--dtype", dtype_text, "bf16 or f16")->check(CLI::IsMember({"bf16", "f16"}));
  app.add_option("--shape", shape_texts,
                 "B=..,H=..,S=..,D=..[,Skv=..,Hkv=..,causal=..,lse=..,lens=..] (repeatable; "
                 "replaces the default set)");
  app.add_option("--runs", opt.runs, "timed runs per side");
  app.add_option("--warmup", opt.warmup, "untimed runs first");
  app.add_flag("--check", do_check, "compare cuDNN with the fp32 GPU reference first");
  app.add_option("--json", json_path, "write the records to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    DType dtype = *parse_dtype(dtype_text);
    std::vector<std::map<std::string, std::string>> shapes;
    for (const std::string& t : shape_texts)
      shapes.push_back(ops::parse_kv(t, "--shape"));
    if (shapes.empty()) shapes = default_shapes();
    const ops::Operator& attention = ops::find_operator("attention");
    bench::Harness harness(opt);
    std::string why_no_cudnn;
    std::unique_ptr<ops::CudnnAttention> dnn;
    if (ops::cudnn_attention_available(&why_no_cudnn))
      dnn = std::make_unique<ops::CudnnAttention>();
    std::cout << "bench_attention: " << (dnn ? dnn->library().describe() : why_no_cudnn) << "\n";
    std::vector<bench::SideBySide> records;
    for (const auto& kv : shapes) {
      ops::Problem p = attention.parse(kv, dtype);
      ops::AttentionDesc d = ops::attention_desc(p);
      bench::SideBySide r;
      r.op = "attention";
      r.shape = p.shape_str();
      r.dtype = dtype_name(dtype);
      r.flops = attention.flops(p);
      // Flushed: a run stopped at a time limit then shows the shape it was on.
      std::cout << p.shape_str() << std::endl;
      bench::time_ours(harness, p, r);
      Buffers b = make_buffers(p, d, harness.stream());
      std::string why = why_no_cudnn;
      if (dnn && dnn->supports(d, &why)) {
        r.ref_name = "cuDNN " + dnn->library().version_text();
        std::cout << "  cuDNN: " << dnn->plan_summary(d) << "\n";
        if (do_check) std::cout << "  " << check(*dnn, d, b, harness.stream()) << "\n";
        r.ref = harness.time([&](CUstream s) { dnn->run(d, b.ptrs(), s); });
      } else {
        // The fallback the operator would use: say so, and time it so the record has a number.
        r.ref_name = "unfused fp32 GPU reference";
        r.ref_note = "fallback, cuDNN unavailable: " + why;
        std::cout << "  reference: " << r.ref_note << "\n";
        rt::DeviceBuffer o32(size_t(d.B * d.H * d.S * d.D) * 4);
        ops::AttentionPtrs rp = b.ptrs();
        rp.o = o32.ptr();
        r.ref = harness.time([&](CUstream s) { ops::gpu_reference_attention(d, rp, s); });
      }
      records.push_back(r);
    }
    std::cout << "\n" << bench::format_table(records);
    if (!json_path.empty()) {
      bench::write_json(json_path, bench::report_json("attention", opt, records));
      std::cout << "wrote " << json_path << "\n";
    }
  } catch (const tp::Error& e) {
    std::cerr << "bench_attention: " << e.what() << "\n";
    return e.kind() == tp::Error::Kind::user ? 2 : 3;
  }
  return 0;
}
