// Building the SDPA forward graph node by node. Data types follow cudnn-frontend's lowering, which
// the fused engines are tuned to match: scores and softmax intermediates f32, index arithmetic
// int32, masks boolean, the probabilities fed to the second matmul in the input dtype.
#include "ops/vendor/CudnnSdpaGraph.h"

#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "tilepilot/error.h"

namespace tp::ops::cudnn {

namespace {

using Dims = std::vector<int64_t>;

class Builder {
public:
  explicit Builder(SdpaGraph& g) : g_(g) {}

  const Desc& tensor(int64_t uid, cudnnDataType_t t, const Dims& dims, const Dims& strides,
                     bool is_virtual, bool by_value, const std::string& name) {
    auto d = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR,
                                    fmt::format("tensor '{}' (uid {})", name, uid));
    d->set_data_type(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_DATA_TYPE), t)
        .set_int64s(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_DIMENSIONS), dims)
        .set_int64s(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_STRIDES), strides)
        .set_int64(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_UNIQUE_ID), uid)
        .set_int64(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), 16)
        .set_bool(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_IS_VIRTUAL), is_virtual);
    if (by_value) d->set_bool(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_IS_BY_VALUE), true);
    d->finalize();
    return keep(std::move(d));
  }
  const Desc& virt(cudnnDataType_t t, const Dims& dims, const Dims& strides,
                   const std::string& name) {
    return tensor(next_uid_++, t, dims, strides, true, false, name);
  }
  const Desc& scalar(int64_t uid, cudnnDataType_t t, const std::string& name) {
    return tensor(uid, t, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true, name);
  }

  /// y = mode(x[, b[, t]]). `axis` only for GEN_INDEX.
  void pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t compute,
                 const Desc& x, const Desc* b, const Desc* t, const Desc& y, int64_t axis = -1) {
    auto pw = std::make_unique<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
                                     "pointwise descriptor of '" + name + "'");
    pw->set(TILEPILOT_ATTR(CUDNN_ATTR_POINTWISE_MODE), CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set_data_type(TILEPILOT_ATTR(CUDNN_ATTR_POINTWISE_MATH_PREC), compute);
    if (mode == CUDNN_POINTWISE_GEN_INDEX)
      pw->set_int64(TILEPILOT_ATTR(CUDNN_ATTR_POINTWISE_AXIS), axis);
    pw->finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
                                     "pointwise operation '" + name + "'");
    op->set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR), *pw)
        .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_XDESC), x);
    if (b) op->set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_BDESC), *b);
    if (t) op->set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_TDESC), *t);
    op->set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_YDESC), y).finalize();
    keep(std::move(pw));
    g_.ops.push_back(std::move(op));
  }

  void reduction(const std::string& name, cudnnReduceTensorOp_t mode, const Desc& x,
                 const Desc& y) {
    auto r = std::make_unique<Desc>(CUDNN_BACKEND_REDUCTION_DESCRIPTOR,
                                    "reduction descriptor of '" + name + "'");
    r->set(TILEPILOT_ATTR(CUDNN_ATTR_REDUCTION_OPERATOR), CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1,
           &mode)
        .set_data_type(TILEPILOT_ATTR(CUDNN_ATTR_REDUCTION_COMP_TYPE), CUDNN_DATA_FLOAT)
        .finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
                                     "reduction operation '" + name + "'");
    op->set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_XDESC), x)
        .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_YDESC), y)
        .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_DESC), *r)
        .finalize();
    keep(std::move(r));
    g_.ops.push_back(std::move(op));
  }

  /// c = a b over the last two dims, batched over the first two. Overrides (per-batch sizes)
  /// may be null.
  void matmul(const std::string& name, const Desc& a, const Desc& b, const Desc& c,
              const Desc* m_override, const Desc* n_override, const Desc* k_override) {
    auto mm = std::make_unique<Desc>(CUDNN_BACKEND_MATMUL_DESCRIPTOR,
                                     "matmul descriptor of '" + name + "'");
    mm->set_data_type(TILEPILOT_ATTR(CUDNN_ATTR_MATMUL_COMP_TYPE), CUDNN_DATA_FLOAT).finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
                                     "matmul operation '" + name + "'");
    op->set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_ADESC), a)
        .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_BDESC), b)
        .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_CDESC), c)
        .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_DESC), *mm);
    if (m_override)
      op->set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC), *m_override);
    if (n_override)
      op->set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC), *n_override);
    if (k_override)
      op->set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC), *k_override);
    op->finalize();
    keep(std::move(mm));
    g_.ops.push_back(std::move(op));
  }

private:
  const Desc& keep(std::unique_ptr<Desc> d) {
    g_.parts.push_back(std::move(d));
    return *g_.parts.back();
  }
  SdpaGraph& g_;
  int64_t next_uid_ = kUidFirstVirtual;
};

Dims dims_of(const std::array<int64_t, 4>& a) {
  return {a[0], a[1], a[2], a[3]};
}

} // namespace

bool sdpa_needs_padding(const AttentionDesc& d) {
  return d.lens || (d.causal && d.S > d.Skv);
}

std::string sdpa_known_limits(const AttentionDesc& d, size_t v) {
  const std::string ver = VendorLibrary{"cuDNN", "", v}.version_text();
  if (v < 90000) return "cuDNN " + ver + " is too old; fused attention here needs cuDNN 9";
  if (v == 91000 || v == 91001)
    return "cuDNN " + ver + " has known bugs in bf16/f16 attention forward; use 9.10.2 or newer";
  if (d.D % 8 || d.D > 256)
    return fmt::format("head dim D={} is outside cuDNN's fused attention (a multiple of 8, at "
                       "most 256)",
                       d.D);
  bool padded = sdpa_needs_padding(d);
  if (d.causal && !padded && v < 90600 && (d.S % 64 || d.Skv % 64))
    return fmt::format("bottom-right causal masking with S={} or Skv={} not a multiple of 64 needs "
                       "cuDNN 9.6 or newer (loaded: {})",
                       d.S, d.Skv, ver);
  if (d.S == 1 && (d.causal || padded) && v <= 90900)
    return "masked attention with a single query row (S=1) needs cuDNN 9.10 or newer (loaded: " +
           ver + ")";
  return "";
}

std::unique_ptr<SdpaGraph> build_sdpa_graph(const AttentionDesc& d, size_t cudnn_version) {
  auto g = std::make_unique<SdpaGraph>();
  g->padded = sdpa_needs_padding(d);
  // cuDNN before 9.10 wants the lowest float rather than -inf as the mask value.
  g->neg_inf = cudnn_version < 91000 ? std::numeric_limits<float>::lowest()
                                     : -std::numeric_limits<float>::infinity();
  g->scale = static_cast<float>(d.effective_scale());
  g->sq = static_cast<int32_t>(d.S);
  g->skv = static_cast<int32_t>(d.Skv);
  Builder b(*g);
  const cudnnDataType_t io = d.dtype == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32, b8 = CUDNN_DATA_BOOLEAN;
  const int64_t B = d.B, H = d.H, S = d.S, Skv = d.Skv, D = d.D, Hkv = d.Hkv;
  const Dims score_dims = {B, H, S, Skv}, score_strides = {H * S * Skv, S * Skv, Skv, 1};
  const Dims row_dims = {B, H, S, 1}, row_strides = {H * S, S, 1, 1};

  const Desc& q = b.tensor(kUidQ, io, {B, H, S, D}, dims_of(d.q_strides()), false, false, "Q");
  auto ks = d.k_strides(); // K^T: the same memory with the s and d axes swapped
  const Desc& kt =
      b.tensor(kUidK, io, {B, Hkv, D, Skv}, {ks[0], ks[1], ks[3], ks[2]}, false, false, "K^T");
  const Desc& v = b.tensor(kUidV, io, {B, Hkv, Skv, D}, dims_of(d.v_strides()), false, false, "V");
  const Desc& o = b.tensor(kUidO, io, {B, H, S, D}, dims_of(d.o_strides()), false, false, "O");
  const Desc* seq_q = nullptr;
  const Desc* seq_kv = nullptr;
  if (g->padded) {
    seq_q = &b.tensor(kUidSeqQ, i32, {B, 1, 1, 1}, {1, 1, 1, 1}, false, false, "seq_len_q");
    seq_kv = &b.tensor(kUidSeqKv, i32, {B, 1, 1, 1}, {1, 1, 1, 1}, false, false, "seq_len_kv");
  }

  const Desc& s0 = b.virt(f32, score_dims, score_strides, "Q.K^T");
  b.matmul("bmm1", q, kt, s0, seq_q, seq_kv, nullptr);
  const Desc& scale = b.scalar(kUidScale, f32, "attn_scale");
  const Desc* s = &b.virt(f32, score_dims, score_strides, "scaled scores");
  b.pointwise("attn_scale", CUDNN_POINTWISE_MUL, f32, s0, &scale, nullptr, *s);

  if (g->padded) {
    const Desc& row = b.virt(i32, score_dims, score_strides, "padding row index");
    b.pointwise("gen_row_idx_padding", CUDNN_POINTWISE_GEN_INDEX, i32, *s, nullptr, nullptr, row,
                2);
    const Desc& col = b.virt(i32, score_dims, score_strides, "padding col index");
    b.pointwise("gen_col_idx_padding", CUDNN_POINTWISE_GEN_INDEX, i32, *s, nullptr, nullptr, col,
                3);
    const Desc& row_ok = b.virt(b8, score_dims, score_strides, "row < seq_len_q");
    b.pointwise("lt_row_sq_padding", CUDNN_POINTWISE_CMP_LT, b8, row, seq_q, nullptr, row_ok);
    const Desc& col_ok = b.virt(b8, score_dims, score_strides, "col < seq_len_kv");
    b.pointwise("lt_col_skv_padding", CUDNN_POINTWISE_CMP_LT, b8, col, seq_kv, nullptr, col_ok);
    const Desc& ok = b.virt(b8, score_dims, score_strides, "padding mask");
    b.pointwise("and_row_col_padding", CUDNN_POINTWISE_LOGICAL_AND, b8, row_ok, &col_ok, nullptr,
                ok);
    const Desc& neg_inf = b.scalar(kUidNegInfPadding, f32, "padding mask value");
    const Desc& masked = b.virt(f32, score_dims, score_strides, "padded scores");
    b.pointwise("select_padding", CUDNN_POINTWISE_BINARY_SELECT, f32, *s, &neg_inf, &ok, masked);
    s = &masked;
  }

  if (d.causal) {
    // Bottom-right aligned: keep key j for query i when i + skv - sq >= j.
    const Desc& row = b.virt(i32, score_dims, score_strides, "causal row index");
    b.pointwise("gen_row_index", CUDNN_POINTWISE_GEN_INDEX, f32, *s, nullptr, nullptr, row, 2);
    const Desc& col = b.virt(i32, score_dims, score_strides, "causal col index");
    b.pointwise("gen_col_index", CUDNN_POINTWISE_GEN_INDEX, f32, *s, nullptr, nullptr, col, 3);
    const Desc& skv = g->padded ? *seq_kv : b.scalar(kUidSkv, i32, "s_kv");
    const Desc& sq = g->padded ? *seq_q : b.scalar(kUidSq, i32, "s_q");
    const Desc& row_skv = b.virt(i32, score_dims, score_strides, "row + skv");
    b.pointwise("row+skv", CUDNN_POINTWISE_ADD, i32, row, &skv, nullptr, row_skv);
    const Desc& diag = b.virt(i32, score_dims, score_strides, "row + skv - sq");
    b.pointwise("row+skv-sq", CUDNN_POINTWISE_SUB, i32, row_skv, &sq, nullptr, diag);
    const Desc& keep = b.virt(b8, score_dims, score_strides, "causal mask");
    b.pointwise("row+skv-sq>=col", CUDNN_POINTWISE_CMP_GE, b8, diag, &col, nullptr, keep);
    const Desc& neg_inf = b.scalar(kUidNegInfCausal, f32, "causal mask value");
    const Desc& masked = b.virt(f32, score_dims, score_strides, "causal scores");
    b.pointwise("binary_select", CUDNN_POINTWISE_BINARY_SELECT, f32, *s, &neg_inf, &keep, masked);
    s = &masked;
  }

  const Desc& mx = b.virt(f32, row_dims, row_strides, "row max");
  b.reduction("Max", CUDNN_REDUCE_TENSOR_MAX, *s, mx);
  const Desc& sub = b.virt(f32, score_dims, score_strides, "scores - max");
  b.pointwise("sub", CUDNN_POINTWISE_SUB, f32, *s, &mx, nullptr, sub);
  const Desc& ex = b.virt(f32, score_dims, score_strides, "exp(scores - max)");
  b.pointwise("exp", CUDNN_POINTWISE_EXP, f32, sub, nullptr, nullptr, ex);
  const Desc& sum = b.virt(f32, row_dims, row_strides, "row sum");
  b.reduction("sum", CUDNN_REDUCE_TENSOR_ADD, ex, sum);
  const Desc& log_sum = b.virt(f32, row_dims, row_strides, "log(row sum)");
  b.pointwise("log", CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, log_sum);
  const Desc& stats = d.lse ? b.tensor(kUidStats, f32, row_dims, row_strides, false, false, "stats")
                            : b.virt(f32, row_dims, row_strides, "stats");
  b.pointwise("add", CUDNN_POINTWISE_ADD, f32, mx, &log_sum, nullptr, stats);
  const Desc& p = b.virt(io, score_dims, score_strides, "softmax");
  b.pointwise("div", CUDNN_POINTWISE_DIV, f32, ex, &sum, nullptr, p);

  b.matmul("bmm2", p, v, o, seq_q, nullptr, seq_kv);
  return g;
}

} // namespace tp::ops::cudnn
