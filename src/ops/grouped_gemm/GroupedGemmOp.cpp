// GroupedGemmOp: the Operator over grouped_gemm's kernel, references and framework.
//
// block_outputs cannot see the offs a run is given, so it answers for the problem's own
// counts (its `counts` key, or the ragged routing drawn from E and R), which are exactly what
// make_args writes into offs: every check, bench and pilot run, which take their inputs from
// make_args, gets each block's exact rows. Paths that run on a caller's tensors do not use
// block_outputs: run_host_framework reads the offs it is given.
#include "ops/grouped_gemm/GroupedGemmOp.h"

#include <algorithm>

#include "ops/ParseHelpers.h"
#include "ops/grouped_gemm/GroupedGemm.h"
#include "tilepilot/error.h"

namespace tp::ops {

namespace gg = grouped_gemm;

std::string GroupedGemmOp::summary() const {
  return "mixture-of-experts GEMM: C[r] = A[r] op(B[e]) for the rows r of expert e, A [R, K] "
         "and C [R, N] stacked by expert, offs i32 [E] the cumulative row ends (run-time, "
         "experts may be empty); B [E, N, K] (nt) or [E, K, N] (nn); f32 accumulate";
}

std::vector<std::pair<std::string, std::string>> GroupedGemmOp::shape_keys() const {
  return {{"E", "experts (at most 256)"},
          {"R", "rows: tokens x top-k, the total of the experts' rows"},
          {"N", "columns of C (an expert's output features)"},
          {"K", "reduction length (an expert's input features)"},
          {"layout", "nt (B [E, N, K], torch Linear weights; default) or nn (B [E, K, N])"},
          {"counts", "rows per expert, colon-separated, summing to R (e.g. counts=37:0:64:5); "
                     "default a seeded ragged routing with empty experts"}};
}

Problem GroupedGemmOp::parse(const std::map<std::string, std::string>& kv, DType dtype) const {
  return gg::parse(kv, dtype);
}

Problem GroupedGemmOp::problem_for(const std::vector<std::vector<int64_t>>& shapes,
                                   const std::vector<DType>& dtypes,
                                   const std::map<std::string, std::string>& options) const {
  for (const auto& [k, v] : options)
    if (k != "layout")
      user_error() << "grouped_gemm: takes only the option layout (nt or nn), got '" << k << "'";
  if (shapes.size() != 4 || dtypes.size() != 4)
    user_error() << "grouped_gemm: takes 4 tensors (A, B, offs, C), got " << shapes.size();
  const std::string layout = options.count("layout") ? options.at("layout") : "nt";
  const bool nt = layout == "nt";
  const std::vector<int64_t>&a = shapes[0], &b = shapes[1], &o = shapes[2], &c = shapes[3];
  if (a.size() != 2) user_error() << "grouped_gemm: A must be 2-d [R, K], got " << shape_text(a);
  const int64_t R = a[0], K = a[1];
  if (b.size() != 3 || b[nt ? 2 : 1] != K)
    user_error() << "grouped_gemm: B must be " << (nt ? "[E, N, K=" : "[E, K=") << K
                 << (nt ? "]" : ", N]") << " for layout " << layout << ", got " << shape_text(b);
  const int64_t E = b[0], N = b[nt ? 1 : 2];
  if (o != std::vector<int64_t>{E} || dtypes[2] != DType::i32)
    user_error() << "grouped_gemm: offs must be i32 [E=" << E
                 << "], the experts' cumulative row ends, got " << dtype_name(dtypes[2]) << " "
                 << shape_text(o);
  if (c != std::vector<int64_t>{R, N})
    user_error() << "grouped_gemm: C must be [R, N] = [" << R << ", " << N << "], got " << shape_text(c);
  for (int i : {1, 3})
    if (dtypes[i] != dtypes[0])
      user_error() << "grouped_gemm: " << (i == 1 ? "B" : "C") << " is " << dtype_name(dtypes[i])
                   << " but A is " << dtype_name(dtypes[0]) << "; A, B and C share one dtype";
  return gg::parse({{"E", std::to_string(E)},
                    {"R", std::to_string(R)},
                    {"N", std::to_string(N)},
                    {"K", std::to_string(K)},
                    {"layout", layout},
                    {"counts", "runtime"}},
                   dtypes[0]);
}

Problem
GroupedGemmOp::problem_from_inputs(const std::vector<std::vector<int64_t>>& shapes,
                                   const std::vector<DType>& dtypes,
                                   const std::map<std::string, std::string>& options) const {
  if (shapes.size() != 3 || shapes[0].size() != 2 || shapes[1].size() != 3)
    user_error() << "grouped_gemm: takes 3 inputs A [R, K], B [E, N, K] (or [E, K, N] with "
                    "layout=nn) and offs [E]";
  const bool nt = !options.count("layout") || options.at("layout") == "nt";
  // C is [R, N] in A's dtype.
  std::vector<std::vector<int64_t>> s = shapes;
  s.push_back({shapes[0][0], shapes[1][nt ? 1 : 2]});
  std::vector<DType> t = dtypes;
  t.push_back(dtypes.at(0));
  return problem_for(s, t, options);
}

std::string GroupedGemmOp::variant_label(const Problem& p) const {
  return p.options.at("layout");
}

std::vector<Knob> GroupedGemmOp::knobs(const std::string& arch) const {
  const bool hopper = arch == "sm_90a";
  return {{"bm", {64, 128}, "rows of one expert per block (a multiple of 16)", 16, 256, 0, 16},
          {"bn", {64, 128, 256}, "columns per block (a multiple of 16)", 16, 256, 0, 16},
          {"bk", hopper ? std::vector<int64_t>{64} : std::vector<int64_t>{32, 64},
           "reduction step (a multiple of 16)", 16, 128, 0, 16},
          {"stages", {2, 3, 4}, "pipeline depth", 1, 8},
          {"threads", {128, 256}, "threads per block (a multiple of 32)", 32, 1024, 0, 32}};
}

Config GroupedGemmOp::default_config(const Problem& p, const std::string& arch) const {
  return gg::default_config(p, arch);
}

void GroupedGemmOp::validate(const Problem& p, const Config& c) const {
  gg::validate(p, c);
}

Kernel GroupedGemmOp::build(const Problem& p, const Config& c) const {
  validate(p, c);
  return gg::build(p, c);
}

std::vector<ArgSpec> GroupedGemmOp::arg_specs(const Problem& p) const {
  return gg::arg_specs(p);
}

std::vector<HostTensor> GroupedGemmOp::make_args(const Problem& p, uint64_t seed) const {
  return gg::make_args(p, seed);
}

std::vector<Box> GroupedGemmOp::block_outputs(const Problem& p, const Config& c,
                                              const std::array<int64_t, 3>& block) const {
  const int64_t bm = c.at("bm"), bn = c.at("bn"), N = p.at("N");
  const std::vector<gg::RowTile> tiles = gg::row_tiles(gg::counts(p), bm);
  if (block[1] >= static_cast<int64_t>(tiles.size())) return {};
  const gg::RowTile& t = tiles[block[1]];
  const int64_t c0 = block[0] * bn;
  return {Box{3, {t.row0, c0}, {std::min(bm, t.row_end - t.row0), std::min(bn, N - c0)}}};
}

double GroupedGemmOp::flops(const Problem& p) const {
  return 2.0 * p.at("R") * p.at("N") * p.at("K");
}

double GroupedGemmOp::min_bytes(const Problem& p) const {
  // Only the experts that get rows have their weights read.
  const std::vector<int64_t> n = gg::counts(p);
  const double used =
      static_cast<double>(std::count_if(n.begin(), n.end(), [](int64_t x) { return x > 0; }));
  const double R = p.at("R"), N = p.at("N"), K = p.at("K");
  return (R * K + used * N * K + R * N) * dtype_bytes(p.dtype) + 4.0 * p.at("E");
}

std::vector<double> GroupedGemmOp::reference(const Problem& p, const std::vector<HostTensor>& args,
                                             const Box& box) const {
  internal_assert(box.tensor == 3) << "grouped_gemm reference: a box of C";
  return gg::reference(p, args, box.min[0], box.extent[0], box.min[1], box.extent[1]);
}

bool GroupedGemmOp::gpu_reference(const Problem& p, const std::vector<DeviceTensor>& args,
                                  const std::vector<DeviceTensor>& out_f32, Stream s) const {
  gg::gpu_reference(p, args, out_f32.at(0), s);
  return true;
}

std::string GroupedGemmOp::framework_name() const {
  return gg::kFrameworkName;
}

std::unique_ptr<Framework> GroupedGemmOp::framework(const Problem& p,
                                                    const FrameworkOptions& o) const {
  return gg::make_framework(p, o);
}

void GroupedGemmOp::run_host_framework(const Problem& p, std::vector<HostTensor>& args) const {
  const std::vector<int64_t> ends = gg::offsets_of(args.at(2), p.at("R"));
  const int64_t rows = ends.empty() ? 0 : ends.back(), N = p.at("N");
  if (rows == 0) return;
  // One box over the experts' rows: the reference decodes each expert's weights once.
  const std::vector<double> ref = gg::reference(p, args, 0, rows, 0, N);
  for (size_t i = 0; i < ref.size(); ++i)
    args[3].set(static_cast<int64_t>(i), ref[i]);
}

Problem GroupedGemmOp::tuning_problem(const Problem& p) const {
  Problem t = p;
  t.options.erase("counts");
  return t;
}

} // namespace tp::ops
