// DecodeAttentionOp: the Operator over decode_attention's kernel, references and framework
// chain.
#include "ops/decode_attention/DecodeAttentionOp.h"

#include <algorithm>
#include <numeric>

#include "ops/ParseHelpers.h"
#include "ops/decode_attention/DecodeAttention.h"
#include "ops/decode_attention/DecodeAttentionFramework.h"
#include "ops/decode_attention/SplitKv.h"
#include "tilepilot/error.h"

namespace tp::ops {

namespace da = decode_attention;

std::string DecodeAttentionOp::summary() const {
  return "out = softmax(q K^T / sqrt(D), causal within the Sq query tokens) V over a KV cache "
         "(contiguous [B, Hkv, L, D] or paged [pages, Hkv, block, D] with a block table), "
         "grouped heads, per-sequence lengths";
}

std::vector<std::pair<std::string, std::string>> DecodeAttentionOp::shape_keys() const {
  return {{"B", "sequences"},
          {"H", "query heads: q and out are [B, H, Sq, D]"},
          {"Hkv", "KV heads, dividing H (default H)"},
          {"Sq", "query tokens per sequence, 1..8 (default 1); token t sees keys "
                 "j < len - Sq + t + 1"},
          {"D", "head dim (64 or 128)"},
          {"L", "KV cache length per sequence (the most; see lens)"},
          {"lens", "per-sequence cache lengths, colon-separated (e.g. lens=5:0:77), each <= L"},
          {"paged", "1: a paged cache k_cache, v_cache [pages, Hkv, block, D], block_table i32 "
                    "[B, ceil(L / block)], lens i32 [B] (default 0: k, v [B, Hkv, L, D])"},
          {"block", "page size of a paged cache: 16 (default), 32, 64, 128 or 256"},
          {"pages", "pages in a paged cache (default B x ceil(L / block))"}};
}

Problem DecodeAttentionOp::parse(const std::map<std::string, std::string>& kv, DType dtype) const {
  return da::parse(kv, dtype);
}

Problem DecodeAttentionOp::problem_for(const std::vector<std::vector<int64_t>>& shapes,
                                       const std::vector<DType>& dtypes,
                                       const std::map<std::string, std::string>& options) const {
  const size_t n = shapes.size();
  if (n < 4 || n > 6)
    user_error() << "decode_attention: takes q, k, v, [lens,] out (4 or 5 tensors) or q, k_cache, "
                    "v_cache, block_table, lens, out (6, paged), got "
                 << n;
  if (!options.empty())
    user_error() << "decode_attention: takes no options (option '" << options.begin()->first
                 << "'); the tensors carry the lengths and the block table";
  const bool pg = n == 6;
  const std::vector<int64_t>& q = shapes[0];
  if (q.size() != 4)
    user_error() << "decode_attention: q must be 4-d [B, H, Sq, D], got " << shape_text(q);
  const int64_t B = q[0], D = q[3];
  const std::vector<int64_t>& k = shapes[1];
  if (k.size() != 4 || k[3] != D || (!pg && k[0] != B))
    user_error() << "decode_attention: tensor '" << (pg ? "k_cache" : "k") << "' must be "
                 << (pg ? "[pages, Hkv, block, D" : "[B=" + std::to_string(B) + ", Hkv, L, D")
                 << "=" << D << "], got " << shape_text(k);
  if (shapes[2] != k)
    user_error() << "decode_attention: tensor '" << (pg ? "v_cache" : "v") << "' must have "
                 << (pg ? "k_cache" : "k") << "'s shape " << shape_text(k) << ", got " << shape_text(shapes[2]);
  std::map<std::string, std::string> kv = {{"B", std::to_string(B)},
                                           {"H", std::to_string(q[1])},
                                           {"Hkv", std::to_string(k[1])},
                                           {"Sq", std::to_string(q[2])},
                                           {"D", std::to_string(D)}};
  if (pg) {
    const std::vector<int64_t>& t = shapes[3];
    if (t.size() != 2 || t[0] != B || dtypes.at(3) != DType::i32)
      user_error() << "decode_attention: tensor 'block_table' must be i32 [B=" << B
                   << ", max_blocks], got " << dtype_name(dtypes.at(3)) << " " << shape_text(t);
    kv["paged"] = "1";
    kv["block"] = std::to_string(k[2]);
    kv["L"] = std::to_string(t[1] * k[2]);
    if (k[0] != B * t[1]) kv["pages"] = std::to_string(k[0]);
  } else {
    kv["L"] = std::to_string(k[2]);
  }
  const bool lens_in = pg || n == 5;
  if (lens_in) {
    const size_t li = pg ? 4 : 3;
    if (shapes[li] != std::vector<int64_t>{B} || dtypes.at(li) != DType::i32)
      user_error() << "decode_attention: tensor 'lens' must be i32 [B] = [" << B
                   << "], one cache length per sequence, got " << dtype_name(dtypes.at(li)) << " "
                   << shape_text(shapes[li]);
  }
  if (shapes[n - 1] != q)
    user_error() << "decode_attention: tensor 'out' must have q's shape " << shape_text(q) << ", got "
                 << shape_text(shapes[n - 1]);
  for (size_t i : {size_t(1), size_t(2), n - 1})
    if (dtypes.at(i) != dtypes[0])
      user_error() << "decode_attention: tensor " << i << " is " << dtype_name(dtypes[i])
                   << " but q is " << dtype_name(dtypes[0])
                   << "; q, the cache and out share one dtype";
  Problem p = da::parse(kv, dtypes[0]);
  if (lens_in && !pg) p.options["lens"] = "runtime";
  return p;
}

Problem
DecodeAttentionOp::problem_from_inputs(const std::vector<std::vector<int64_t>>& shapes,
                                       const std::vector<DType>& dtypes,
                                       const std::map<std::string, std::string>& options) const {
  if (shapes.size() < 3 || shapes.size() > 5)
    user_error() << "decode_attention: takes 3 or 4 inputs (q, k, v[, lens]) or 5 (paged: q, "
                    "k_cache, v_cache, block_table, lens), got "
                 << shapes.size();
  // out takes q's shape and dtype.
  std::vector<std::vector<int64_t>> s = shapes;
  std::vector<DType> t = dtypes;
  s.push_back(shapes[0]);
  t.push_back(dtypes.at(0));
  return problem_for(s, t, options);
}

std::string DecodeAttentionOp::variant_label(const Problem& p) const {
  if (da::paged(p)) return "paged" + std::to_string(p.at("block"));
  return p.options.count("lens") ? "padded" : "contiguous";
}

std::vector<Knob> DecodeAttentionOp::knobs(const std::string& arch) const {
  // One wgmma M is 64 rows; the interpreter also takes 16-row tiles.
  std::vector<int64_t> bm = arch == "cpu" ? std::vector<int64_t>{16, 64} : std::vector<int64_t>{64};
  return {{"bm", bm, "query rows (grouped heads x query tokens) per block, a multiple of 16", 16,
           256, 0, 16},
          {"bn",
           {32, 64, 128},
           "keys per step, a multiple of 16 (paged: the page size)",
           16,
           256,
           0,
           16},
          {"stages", {2, 3}, "pipeline depth of the K/V loads", 1, 4},
          {"threads", {128}, "threads per block (a multiple of 32)", 32, 1024, 0, 32},
          // Absent means 1 (neutral), so a release pinned before split-KV still names its
          // single kernel.
          {"splits",
           {1, 2, 4, 8, 16, 32},
           "key splits per sequence (1: one kernel; more: split-KV partials merged by a second "
           "kernel through their log-sum-exp)",
           1,
           da::kMaxSplits,
           1}};
}

namespace {

/// The SMs the default config fills when it splits the keys: the H200's 132 on sm_90a (the
/// device's own count is not known to a config; the tuner searches the splits knob), the A100's
/// 108 on sm_80.
int prior_sm_count(const std::string& arch) {
  return arch == "sm_80" ? 108 : 132;
}

int64_t splits_in(const Config& c) {
  return c.count("splits") ? da::splits_of(c) : 1;
}

} // namespace

Config DecodeAttentionOp::default_config(const Problem& p, const std::string& arch) const {
  Config c = da::default_config(p, arch);
  c["splits"] = da::choose_splits(p, c, prior_sm_count(arch));
  return c;
}

void DecodeAttentionOp::validate(const Problem& p, const Config& c) const {
  da::validate(p, c);
}

Kernel DecodeAttentionOp::build(const Problem& p, const Config& c) const {
  // With splits, the program's last step (the one that writes out), as Operator::build says.
  return splits_in(c) > 1 ? da::build_combine(p, c) : da::build(p, c);
}

KernelProgram DecodeAttentionOp::program(const Problem& p, const Config& c) const {
  if (splits_in(c) <= 1) return Operator::program(p, c);
  // Call arguments: the inputs 0 .. out - 1, then out; intermediates n (o_part), n + 1 (lse).
  const int out = da::out_index(p), n = static_cast<int>(arg_specs(p).size());
  std::vector<int> split_args;
  for (int i = 0; i < out; ++i)
    split_args.push_back(i);
  split_args.push_back(n);
  split_args.push_back(n + 1);
  KernelProgram prog;
  prog.intermediates = da::split_intermediates(p, c);
  prog.steps.push_back({da::build_split(p, c), split_args});
  prog.steps.push_back({da::build_combine(p, c), {n, n + 1, out}});
  return prog;
}

std::vector<ArgSpec> DecodeAttentionOp::arg_specs(const Problem& p) const {
  return da::arg_specs(p);
}

std::vector<HostTensor> DecodeAttentionOp::make_args(const Problem& p, uint64_t seed) const {
  return da::make_args(p, seed);
}

std::vector<int> DecodeAttentionOp::outputs(const Problem& p) const {
  return {da::out_index(p)};
}

namespace {

double total_keys(const Problem& p) {
  std::vector<int64_t> L = da::lengths(p);
  return static_cast<double>(std::accumulate(L.begin(), L.end(), int64_t{0}));
}

} // namespace

double DecodeAttentionOp::flops(const Problem& p) const {
  // q.k and p.v: 2 D each per (head, token, key); the causal corner of Sq tokens is ignored.
  return 4.0 * p.at("H") * p.at("Sq") * p.at("D") * total_keys(p);
}

double DecodeAttentionOp::min_bytes(const Problem& p) const {
  // K and V read once per KV head dominate; q, out, lens and the block table are small.
  const double e = dtype_bytes(p.dtype), qo = 2.0 * p.at("B") * p.at("H") * p.at("Sq") * p.at("D");
  double table = da::paged(p) ? 4.0 * p.at("B") * da::pages_per_seq(p) : 0;
  return 2.0 * p.at("Hkv") * p.at("D") * total_keys(p) * e + qo * e + table +
         (da::has_lens(p) ? 4.0 * p.at("B") : 0);
}

std::vector<double> DecodeAttentionOp::reference(const Problem& p,
                                                 const std::vector<HostTensor>& args,
                                                 const Box& box) const {
  internal_assert(box.tensor == da::out_index(p) && box.extent[0] == 1)
      << "decode_attention reference: a box of out in one sequence";
  return da::reference(p, args, box.min[0], box.min[1], box.extent[1], box.min[2], box.extent[2],
                       box.min[3], box.extent[3]);
}

std::string DecodeAttentionOp::framework_name() const {
  return da::kFrameworkName;
}

std::unique_ptr<Framework> DecodeAttentionOp::framework(const Problem& p,
                                                        const FrameworkOptions&) const {
  // No vendor library is involved: the options change nothing.
  return da::make_framework(p);
}

Problem DecodeAttentionOp::tuning_problem(const Problem& p) const {
  Problem t = p;
  if (da::paged(p)) {
    t.shape["L"] = da::pages_per_seq(p) * p.at("block");
    t.options.erase("lens");
  } else if (t.options.count("lens")) {
    t.options["lens"] = "runtime";
  }
  return t;
}

} // namespace tp::ops
