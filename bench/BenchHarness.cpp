// Records, the "ours" registry and the device-side input fill (timing: runtime/Timing.cpp).
#include "BenchHarness.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <map>

#include "runtime/Driver.h"
#include "runtime/Environment.h"
#include "runtime/Jit.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace tp::bench {

namespace {

std::map<std::string, OursFactory>& registry() {
  static std::map<std::string, OursFactory> r;
  return r;
}

/// splitmix64 of (seed, index) -> uniform [-1, 1) -> bf16/f16 bits (round to nearest even).
const char* kFill = R"(
extern "C" __global__ void fill_uniform(unsigned short* dst, unsigned long long n,
                                        unsigned long long seed, int is_bf16) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned long long z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    float u = (float)(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    unsigned short bits;
    if (is_bf16) {
      unsigned x = __float_as_uint(u);
      bits = (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
    } else {
      asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(u));
    }
    dst[i] = bits;
  }
}
)";

} // namespace

std::optional<double> SideBySide::speedup() const {
  if (!ours || !ref || ours->median_ms <= 0) return std::nullopt;
  return ref->median_ms / ours->median_ms;
}

nlohmann::json to_json(const SideBySide& r) {
  using nlohmann::json;
  auto num = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  auto field = [&](const std::optional<Timing>& t, double Timing::*m) {
    return t ? json((*t).*m) : json(nullptr);
  };
  json j = {{"op", r.op},
            {"shape", r.shape},
            {"dtype", r.dtype},
            {"flops", r.flops},
            {"ours_ms_median", field(r.ours, &Timing::median_ms)},
            {"ours_ms_iqr", field(r.ours, &Timing::iqr_ms)},
            {"ours_tflops", r.ours ? json(tflops(r.flops, r.ours->median_ms)) : json(nullptr)},
            {"ours_note", r.ours_note},
            {"ref_name", r.ref_name},
            {"ref_ms_median", field(r.ref, &Timing::median_ms)},
            {"ref_ms_iqr", field(r.ref, &Timing::iqr_ms)},
            {"ref_tflops", r.ref ? json(tflops(r.flops, r.ref->median_ms)) : json(nullptr)},
            {"ref_note", r.ref_note},
            {"speedup", num(r.speedup())}};
  return j;
}

std::optional<double> geomean_speedup(const std::vector<SideBySide>& records) {
  double log_sum = 0;
  int n = 0;
  for (const SideBySide& r : records)
    if (auto s = r.speedup()) {
      log_sum += std::log(*s);
      ++n;
    }
  if (n == 0) return std::nullopt;
  return std::exp(log_sum / n);
}

std::string format_table(const std::vector<SideBySide>& records) {
  auto ms = [](const std::optional<Timing>& t) {
    return t ? fmt::format("{:.4f} ±{:.4f}", t->median_ms, t->iqr_ms) : std::string("-");
  };
  auto tf = [](const std::optional<Timing>& t, double flops) {
    return t ? fmt::format("{:.1f}", tflops(flops, t->median_ms)) : std::string("-");
  };
  std::string out = fmt::format("{:<44} {:>6} {:>20} {:>8} {:>20} {:>8} {:>8}\n", "shape", "dtype",
                                "ours ms (IQR)", "TFLOP/s", "ref ms (IQR)", "TFLOP/s", "speedup");
  std::vector<std::string> notes;
  for (const SideBySide& r : records) {
    auto s = r.speedup();
    out += fmt::format("{:<44} {:>6} {:>20} {:>8} {:>20} {:>8} {:>8}\n", r.shape, r.dtype,
                       ms(r.ours), tf(r.ours, r.flops), ms(r.ref), tf(r.ref, r.flops),
                       s ? fmt::format("{:.3f}x", *s) : std::string("-"));
    if (!r.ours && !r.ours_note.empty()) notes.push_back(r.shape + ": ours: " + r.ours_note);
    if (!r.ref_note.empty()) notes.push_back(r.shape + ": " + r.ref_name + ": " + r.ref_note);
  }
  if (auto g = geomean_speedup(records))
    out += fmt::format("geometric mean speedup: {:.3f}x\n", *g);
  for (const std::string& n : notes)
    out += n + "\n";
  return out;
}

bool register_ours(const std::string& op, OursFactory factory) {
  registry()[op] = std::move(factory);
  return true;
}

const OursFactory* find_ours(const std::string& op) {
  auto it = registry().find(op);
  return it == registry().end() ? nullptr : &it->second;
}

void time_ours(Harness& h, const ops::Problem& p, SideBySide& r) {
  std::string why;
  std::optional<Timed> fn;
  if (const OursFactory* f = find_ours(p.op)) {
    try {
      fn = (*f)(p, &why);
    } catch (const Error& e) {
      why = e.what();
    }
  } else {
    why = "no CUDA backend registered for " + p.op + " (bench/Ours*.cpp)";
  }
  if (fn) {
    r.ours = h.time(*fn);
    return;
  }
  r.ours_note = "not available (" + why + ")";
  std::cout << "  ours: " << r.ours_note << "\n";
}

nlohmann::json report_json(const std::string& bench, const TimingOptions& o,
                           const std::vector<SideBySide>& records) {
  nlohmann::json recs = nlohmann::json::array();
  for (const SideBySide& r : records)
    recs.push_back(to_json(r));
  auto g = geomean_speedup(records);
  return {{"bench", bench},
          {"environment", rt::to_json(rt::capture_environment())},
          {"options",
           {{"warmup", o.warmup},
            {"runs", o.runs},
            {"flush_l2", o.flush_l2},
            {"flush_bytes", o.flush_bytes}}},
          {"records", recs},
          {"geomean_speedup", g ? nlohmann::json(*g) : nlohmann::json(nullptr)}};
}

void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path);
  if (!f) user_error() << "bench: cannot write " << path << "; check the directory exists";
  f << j.dump(2) << "\n";
  if (!f) user_error() << "bench: writing " << path << " failed";
}

void fill_uniform(CUdeviceptr dst, size_t count, DType dtype, uint64_t seed, CUstream stream) {
  if (dtype != DType::bf16 && dtype != DType::f16)
    user_error() << "bench fill: dtype " << dtype_name(dtype) << " is not supported";
  if (count == 0) return;
  static CUfunction fn = [] {
    std::string why;
    auto info = rt::device_info(rt::selected_device_ordinal(), &why);
    if (!info) user_error() << "bench: no GPU: " << why;
    return rt::jit_load(kFill, "fill_uniform", "bench fill_uniform", info->arch, {}).fn;
  }();
  unsigned long long n = count, s = seed * 0x2545f4914f6cdd1dull;
  int is_bf16 = dtype == DType::bf16;
  void* args[] = {&dst, &n, &s, &is_bf16};
  rt::LaunchConfig cfg;
  cfg.grid = {static_cast<unsigned>(std::min<size_t>((count + 255) / 256, 132 * 16)), 1, 1};
  cfg.block = {256, 1, 1};
  cfg.stream = stream;
  rt::launch(fn, cfg, args);
}

} // namespace tp::bench
