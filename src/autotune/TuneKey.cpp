// Tuning-database keys: bucketing, canonical text, JSON form.
#include "autotune/TuneKey.h"

#include <cctype>
#include <xxhash.h>

#include "tilepilot/error.h"

namespace tp::autotune {

namespace {

// Shape keys kept exact per operator (they select a different kernel, not a different size).
bool exact_shape_key(const std::string& op, const std::string& k) {
  return op == "attention" && (k == "D" || k == "causal" || k == "lse");
}

std::string file_safe(const std::string& s) {
  std::string out;
  for (char c : s)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

} // namespace

int64_t bucket_size(int64_t v) {
  if (v <= 128) return v;
  int64_t b = 256;
  while (b < v)
    b *= 2;
  return b;
}

TuneKey make_key(const ops::Problem& p, const rt::DeviceInfo& d,
                 const std::string& tilepilot_version) {
  TuneKey k;
  k.op = p.op;
  k.dtype = dtype_name(p.dtype);
  for (const auto& [name, v] : p.shape) {
    if (p.op == "attention" && name == "Hkv") continue; // folded into the group ratio below
    k.shape[name] = exact_shape_key(p.op, name) ? v : bucket_size(v);
  }
  if (p.op == "attention" && p.shape.count("H") && p.shape.count("Hkv") && p.shape.at("Hkv") > 0)
    k.shape["group"] = p.shape.at("H") / p.shape.at("Hkv");
  for (const auto& [name, v] : p.options)
    k.options[name] = (p.op == "attention" && name == "lens") ? "padded" : v;
  k.gpu = d.name;
  k.arch = d.arch;
  k.sm_count = d.sm_count;
  k.driver = d.driver_version;
  k.tilepilot = tilepilot_version;
  return k;
}

std::string TuneKey::canonical() const {
  // Field names and '|' separators make the text unambiguous for the values keys can hold.
  std::string s = "op=" + op + "|dtype=" + dtype;
  for (const auto& [k, v] : shape)
    s += "|shape." + k + "=" + std::to_string(v);
  for (const auto& [k, v] : options)
    s += "|opt." + k + "=" + v;
  s += "|gpu=" + gpu + "|arch=" + arch + "|sms=" + std::to_string(sm_count) + "|driver=" + driver +
       "|tilepilot=" + tilepilot;
  return s;
}

std::string TuneKey::file_stem() const {
  std::string c = canonical();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH64(c.data(), c.size(), 0)));
  return file_safe(op) + "-" + file_safe(dtype) + "-" + hex;
}

nlohmann::json TuneKey::to_json() const {
  return {{"op", op},
          {"dtype", dtype},
          {"shape", shape},
          {"options", options},
          {"gpu", gpu},
          {"arch", arch},
          {"sm_count", sm_count},
          {"driver", driver},
          {"tilepilot", tilepilot}};
}

std::optional<TuneKey> TuneKey::from_json(const nlohmann::json& j, std::string* why) {
  try {
    TuneKey k;
    j.at("op").get_to(k.op);
    j.at("dtype").get_to(k.dtype);
    j.at("shape").get_to(k.shape);
    j.at("options").get_to(k.options);
    j.at("gpu").get_to(k.gpu);
    j.at("arch").get_to(k.arch);
    j.at("sm_count").get_to(k.sm_count);
    j.at("driver").get_to(k.driver);
    j.at("tilepilot").get_to(k.tilepilot);
    return k;
  } catch (const nlohmann::json::exception& e) {
    if (why) *why = std::string("not a tuning key: ") + e.what();
    return std::nullopt;
  }
}

} // namespace tp::autotune
