// W4a16GemmOp: the Operator over the w4a16 kernel, references and framework chain.
#include "ops/w4a16_gemm/W4a16GemmOp.h"

#include <algorithm>

#include "ops/ParseHelpers.h"
#include "ops/gemm/GemmSplitK.h"
#include "ops/reference/GpuReference.h"
#include "ops/w4a16_gemm/W4a16Gemm.h"
#include "ops/w4a16_gemm/W4a16GemmFramework.h"
#include "passes/Target.h"
#include "runtime/DeviceBuffer.h"
#include "tilepilot/error.h"

namespace tp::ops {

std::string W4a16GemmOp::summary() const {
  return "C[M,N] = A[M,K] dequant(W); W i32 [K/8, N], 8 int4 codes per word along K (row 8r+i "
         "in bits 4i..4i+3), w = (code - 8) * scales[k/group, n]; f32 accumulate";
}

std::vector<std::pair<std::string, std::string>> W4a16GemmOp::shape_keys() const {
  return {{"M", "rows of A and C (tokens)"},
          {"N", "columns of C (output features)"},
          {"K", "reduction length (input features), a multiple of group"},
          {"group", "rows of K that share one scale, a multiple of 8; default 128"}};
}

Problem W4a16GemmOp::parse(const std::map<std::string, std::string>& kv, DType dtype) const {
  return w4a16::parse(kv, dtype);
}

Problem W4a16GemmOp::problem_for(const std::vector<std::vector<int64_t>>& shapes,
                                 const std::vector<DType>& dtypes,
                                 const std::map<std::string, std::string>& options) const {
  if (!options.empty())
    user_error() << "w4a16_gemm: takes no options, got '" << options.begin()->first << "'";
  if (shapes.size() != 4 || dtypes.size() != 4)
    user_error() << "w4a16_gemm: takes 4 tensors (A, W, scales, C), got " << shapes.size();
  const char* names[] = {"A", "W", "scales", "C"};
  for (size_t i = 0; i < 4; ++i)
    if (shapes[i].size() != 2)
      user_error() << "w4a16_gemm: tensor '" << names[i] << "' must be 2-d, got "
                   << shape_text(shapes[i]);
  const auto &a = shapes[0], &w = shapes[1], &s = shapes[2], &c = shapes[3];
  const int64_t M = a[0], K = a[1], N = c[1];
  if (dtypes[1] != DType::i32)
    user_error() << "w4a16_gemm: W must be i32 (8 int4 codes per word), got "
                 << dtype_name(dtypes[1]);
  if (dtypes[2] != dtypes[0] || dtypes[3] != dtypes[0])
    user_error() << "w4a16_gemm: A is " << dtype_name(dtypes[0]) << " but scales are "
                 << dtype_name(dtypes[2]) << " and C is " << dtype_name(dtypes[3])
                 << "; A, scales and C share one dtype";
  if (c[0] != M || w != std::vector<int64_t>{K / 8, N} || K % 8 || s[1] != N || s[0] < 1 ||
      K % s[0])
    user_error() << "w4a16_gemm: shapes do not agree: A " << shape_text(a) << ", W "
                 << shape_text(w) << ", scales " << shape_text(s) << ", C " << shape_text(c)
                 << "; need A [M, K], W [K/8, N], scales [K/group, N], C [M, N]";
  return w4a16::parse({{"M", std::to_string(M)},
                       {"N", std::to_string(N)},
                       {"K", std::to_string(K)},
                       {"group", std::to_string(K / s[0])}},
                      dtypes[0]);
}

Problem W4a16GemmOp::problem_from_inputs(const std::vector<std::vector<int64_t>>& shapes,
                                         const std::vector<DType>& dtypes,
                                         const std::map<std::string, std::string>& options) const {
  if (shapes.size() != 3 || dtypes.size() != 3 || shapes[0].size() != 2 || shapes[1].size() != 2)
    user_error() << "w4a16_gemm: takes 3 inputs A [M, K], W [K/8, N], scales [K/group, N]";
  // C is [M, N] in A's dtype.
  return problem_for({shapes[0], shapes[1], shapes[2], {shapes[0][0], shapes[1][1]}},
                     {dtypes[0], dtypes[1], dtypes[2], dtypes[0]}, options);
}

namespace {

/// Decode streams the words with few blocks per SM; a second resident block hides the
/// unpacking's latency behind the other's loads where shared memory allows it.
Knob blocks_per_sm(std::vector<int64_t> searched) {
  return {"blocks_per_sm",
          std::move(searched),
          "blocks that share an SM (KernelOptions::blocks_per_sm; 1 to 4)",
          1,
          4,
          1};
}

/// The swapped form (C^T = W^T A^T, weights unpacked into registers as the tensor cores' A
/// operand) exists where wgmma takes A from registers: sm_90a, and the interpreter, which runs
/// every config some GPU arch takes. Absent means 0, so configs pinned before it name the same
/// kernel.
Knob swap_ab(std::vector<int64_t> searched, int64_t max) {
  return {"swap_ab",
          std::move(searched),
          "1: C^T = W^T A^T, weights unpacked into registers as the tensor-core A operand, bm "
          "rows of A as its N (decode; sm_90a)",
          0,
          max,
          0};
}

/// K splits of the swapped form: more blocks where the column tiles alone leave SMs idle (N =
/// 4096 gives 64 tiles of 64 columns for 132 SMs). Absent means 1.
Knob splits(std::vector<int64_t> searched) {
  return {"splits",
          std::move(searched),
          "K splits per column tile (swap_ab=1; more: f32 partials summed by gemm's combine "
          "kernel)",
          1,
          splitk::kMaxSplits,
          1};
}

} // namespace

std::vector<Knob> W4a16GemmOp::knobs(const std::string& arch) const {
  // `values` is what the tuner searches on `arch`; min..max what a config may set. Decode
  // wants narrow column tiles (many blocks over N), prefill the large tensor-core tiles.
  if (arch == "sm_90a")
    return {
        {"bm",
         {16, 64, 128, 256},
         "block tile rows (a multiple of 16; wgmma takes 64 per warpgroup)",
         16,
         256,
         0,
         16},
        {"bn", {32, 64, 128, 256}, "block tile columns (a multiple of 16)", 16, 256, 0, 16},
        {"bk", {64, 128}, "reduction step (a multiple of 16 nesting with group)", 16, 256, 0, 16},
        {"stages", {2, 3, 4}, "pipeline depth", 1, 8},
        {"threads", {128, 256}, "threads per block (a multiple of 32)", 32, 1024, 0, 32},
        blocks_per_sm({1, 2, 4}),
        swap_ab({0, 1}, 1),
        splits({1, 2, 4})};
  if (arch == "sm_80")
    return {{"bm", {16, 64, 128}, "block tile rows (a multiple of 16)", 16, 256, 0, 16},
            {"bn", {32, 64, 128}, "block tile columns (a multiple of 16)", 16, 256, 0, 16},
            {"bk",
             {32, 64, 128},
             "reduction step (a multiple of 16 nesting with group)",
             16,
             256,
             0,
             16},
            {"stages", {2, 3, 4}, "pipeline depth", 1, 8},
            {"threads", {128, 256}, "threads per block (a multiple of 32)", 32, 1024, 0, 32},
            blocks_per_sm({1}),
            swap_ab({0}, 0),
            splits({1})};
  return {{"bm", {16, 64}, "block tile rows (a multiple of 16)", 16, 256, 0, 16},
          {"bn", {32, 64}, "block tile columns (a multiple of 16)", 16, 256, 0, 16},
          {"bk", {32, 64}, "reduction step (a multiple of 16 nesting with group)", 16, 256, 0, 16},
          {"stages", {2}, "pipeline depth", 1, 8},
          {"threads", {128}, "threads per block (a multiple of 32)", 32, 1024, 0, 32},
          blocks_per_sm({1}),
          swap_ab({0}, 1),
          splits({1})};
}

Config W4a16GemmOp::default_config(const Problem& p, const std::string& arch) const {
  Config c = w4a16::default_config(p, arch);
  // A scale group that no 64-row step nests with widens the K step (group 72: bk 144), and the
  // large tiles' stages grow with it: 256 x 128 at bk 144 needs 246 KB in 3 stages (found by
  // the compute-sanitizer sweep on the H100, 2026-12-06: the default could not run M = 130,
  // K = 720, group = 72). Fewer stages, then half the rows, until the compiler's plan fits. The
  // decode tiles (sm_90a, M <= 64) are small enough at any step.
  if (arch == "cpu" || (arch.rfind("sm_90a", 0) == 0 && p.at("M") <= 64)) return c;
  const int64_t limit = passes::Target::parse(arch).smem_limit(), stages = c.at("stages");
  // One plan a try: a default that fits (nearly every shape) costs one.
  auto fit = [&] {
    bool fits;
    while (!(fits = estimate(p, c, arch).smem_bytes <= limit) && c.at("stages") > 2)
      c["stages"] -= 1;
    return fits;
  };
  if (!fit() && c.at("bm") > 64) {
    c["bm"] /= 2;
    c["stages"] = stages;
    fit();
  }
  return c;
}

void W4a16GemmOp::validate(const Problem& p, const Config& c) const {
  w4a16::validate(p, c);
}

Kernel W4a16GemmOp::build(const Problem& p, const Config& c) const {
  validate(p, c);
  // With splits, the program's last step (the one that writes C), as Operator::build says.
  if (w4a16::splits_of(c) > 1) return splitk::build_combine(p.dtype, c);
  return w4a16::build(p, c);
}

KernelProgram W4a16GemmOp::program(const Problem& p, const Config& c) const {
  validate(p, c);
  if (w4a16::splits_of(c) <= 1) return Operator::program(p, c);
  // Call arguments A 0, W 1, scales 2, C 3; the partials are intermediate 0, bound as 4.
  KernelProgram prog;
  prog.intermediates = {{DType::f32, {w4a16::splits_of(c), p.at("M"), p.at("N")}}};
  prog.steps.push_back({w4a16::build_split(p, c), {0, 1, 2, 4}});
  prog.steps.push_back({splitk::build_combine(p.dtype, c), {4, 3}});
  return prog;
}

std::vector<ArgSpec> W4a16GemmOp::arg_specs(const Problem& p) const {
  const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
  return {{p.dtype, {M, K}},
          {DType::i32, {K / 8, N}},
          {p.dtype, {K / p.at("group"), N}},
          {p.dtype, {M, N}}};
}

std::vector<HostTensor> W4a16GemmOp::make_args(const Problem& p, uint64_t seed) const {
  return w4a16::make_args(p, seed);
}

double W4a16GemmOp::flops(const Problem& p) const {
  return 2.0 * p.at("M") * p.at("N") * p.at("K");
}

double W4a16GemmOp::min_bytes(const Problem& p) const {
  const double M = p.at("M"), N = p.at("N"), K = p.at("K"), e = dtype_bytes(p.dtype);
  // A and C in the dtype, half a byte per weight, one scale per group and column.
  return (M * K + M * N) * e + K * N / 2 + K / p.at("group") * N * e;
}

std::vector<double> W4a16GemmOp::reference(const Problem& p, const std::vector<HostTensor>& args,
                                           const Box& box) const {
  return w4a16::reference(p, args, box.min[0], box.extent[0], box.min[1], box.extent[1]);
}

bool W4a16GemmOp::gpu_reference(const Problem& p, const std::vector<DeviceTensor>& a,
                                const std::vector<DeviceTensor>& out, Stream s) const {
  // The framework's dequantize kernel, then the plain fp32 reference GEMM: nothing of the
  // tile-language kernel is shared.
  rt::DeviceBuffer dense(static_cast<size_t>(dtype_bytes(p.dtype)) * p.at("K") * p.at("N"));
  w4a16::dequantize(p, a.at(1).ptr, a.at(2).ptr, dense.ptr(), s);
  gpu_reference_gemm(p.dtype, "nn", p.at("M"), p.at("N"), p.at("K"), a.at(0).ptr, dense.ptr(),
                     out.at(0).ptr, s);
  synchronize(); // `dense` is freed on return
  return true;
}

std::string W4a16GemmOp::framework_name() const {
  return w4a16::kFrameworkName;
}

std::unique_ptr<Framework> W4a16GemmOp::framework(const Problem& p,
                                                  const FrameworkOptions& o) const {
  return w4a16::make_framework(p, o);
}

} // namespace tp::ops
