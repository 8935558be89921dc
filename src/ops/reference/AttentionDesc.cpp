// AttentionDesc: resolved strides, text forms and validation.
#include "ops/reference/AttentionDesc.h"

#include <cmath>
#include <fmt/format.h>

#include "ops/attention/AttentionOp.h"
#include "tilepilot/error.h"

namespace tp::ops {

namespace {

std::array<int64_t, 4> resolve(const std::array<int64_t, 4>& s, int64_t heads, int64_t seq,
                               int64_t D) {
  if (s[0] || s[1] || s[2] || s[3]) return s;
  return {heads * seq * D, seq * D, D, 1};
}

std::string strides_text(const std::array<int64_t, 4>& s) {
  return fmt::format("[{}, {}, {}, {}]", s[0], s[1], s[2], s[3]);
}

} // namespace

double AttentionDesc::effective_scale() const {
  return scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(D));
}

std::array<int64_t, 4> AttentionDesc::q_strides() const {
  return resolve(q_stride, H, S, D);
}
std::array<int64_t, 4> AttentionDesc::k_strides() const {
  return resolve(k_stride, Hkv, Skv, D);
}
std::array<int64_t, 4> AttentionDesc::v_strides() const {
  return resolve(v_stride, Hkv, Skv, D);
}
std::array<int64_t, 4> AttentionDesc::o_strides() const {
  return resolve(o_stride, H, S, D);
}

std::string AttentionDesc::str() const {
  std::string s = fmt::format("attention {} B={} H={} Hkv={} S={} Skv={} D={}", dtype_name(dtype),
                              B, H, Hkv, S, Skv, D);
  if (causal) s += " causal";
  if (lens) s += " lens";
  if (lse) s += " lse";
  if (scale > 0) s += fmt::format(" scale={}", scale);
  bool strided = false;
  for (const auto* st : {&q_stride, &k_stride, &v_stride, &o_stride})
    strided = strided || (*st)[0] || (*st)[1] || (*st)[2] || (*st)[3];
  if (strided)
    s += " strides q" + strides_text(q_strides()) + " k" + strides_text(k_strides()) + " v" +
         strides_text(v_strides()) + " o" + strides_text(o_strides());
  return s;
}

std::string AttentionDesc::key() const {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}{}{}|{:.17g}|{}{}{}{}", dtype_name(dtype), B, H, Hkv,
                     S, Skv, D, int(causal), int(lens), int(lse), effective_scale(),
                     strides_text(q_strides()), strides_text(k_strides()),
                     strides_text(v_strides()), strides_text(o_strides()));
}

AttentionDesc attention_desc(const Problem& p) {
  AttentionDesc d;
  d.dtype = p.dtype;
  d.B = p.at("B");
  d.H = p.at("H");
  d.S = p.at("S");
  d.D = p.at("D");
  d.Skv = p.get("Skv", d.S);
  d.Hkv = p.get("Hkv", d.H);
  d.causal = p.get("causal", 0) != 0;
  d.lse = p.get("lse", 0) != 0;
  d.lens = p.options.count("lens") > 0;
  if (p.options.count("scale")) d.scale = std::stod(p.options.at("scale"));
  return d;
}

void validate_attention_desc(const AttentionDesc& d, const char* who) {
  if (d.dtype != DType::bf16 && d.dtype != DType::f16)
    user_error() << who << ": dtype " << dtype_name(d.dtype)
                 << " is not supported; use bf16 or f16";
  for (auto [name, v] :
       {std::pair{"B", d.B}, {"H", d.H}, {"Hkv", d.Hkv}, {"S", d.S}, {"Skv", d.Skv}, {"D", d.D}})
    if (v <= 0) user_error() << who << ": " << name << "=" << v << " must be positive";
  if (d.H % d.Hkv)
    user_error() << who << ": Hkv=" << d.Hkv << " does not divide H=" << d.H
                 << "; grouped heads need H to be a multiple of Hkv";
  if (!(d.scale >= 0) || std::isinf(d.scale))
    user_error() << who << ": scale=" << d.scale << " must be finite and >= 0 (0: 1/sqrt(D))";
  const std::pair<const char*, std::array<int64_t, 4>> all[] = {
      {"Q", d.q_strides()}, {"K", d.k_strides()}, {"V", d.v_strides()}, {"O", d.o_strides()}};
  for (const auto& [name, s] : all) {
    if (s[3] != 1)
      user_error() << who << ": " << name << " has d stride " << s[3]
                   << "; the head dimension must be contiguous (stride 1)";
    if (s[0] < 0 || s[1] < 0 || s[2] < 0)
      user_error() << who << ": " << name << " strides " << strides_text(s)
                   << " must not be negative";
  }
}

void validate_attention_ptrs(const AttentionDesc& d, const AttentionPtrs& p, const char* who) {
  const std::pair<const char*, CUdeviceptr> need[] = {
      {"Q", p.q}, {"K", p.k}, {"V", p.v}, {"O", p.o}};
  for (const auto& [name, ptr] : need)
    if (!ptr) user_error() << who << ": " << name << " is a null device pointer";
  if (d.lse && !p.lse)
    user_error() << who << ": the description asks for LSE but the lse pointer is null";
  if (d.lens && !p.lens)
    user_error() << who
                 << ": the description has per-batch key lengths but the lens pointer is null";
}

} // namespace tp::ops
