// Tuning-database keys: bucketing, canonical text, JSON form.
#include "autotune/TuneKey.h"

#include <cctype>
#include <xxhash.h>

#include "release/Files.h"
#include "release/ReleaseManifest.h"
#include "tilepilot/error.h"
#include <limits>
#include <set>

namespace tp::autotune {

namespace {

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
  // The operator decides what the key is made of (keys folded or dropped) and which keys pick
  // a different kernel (exact); every other size is bucketed.
  const ops::Operator& op = ops::find_operator(p.op);
  const ops::Problem tp = op.tuning_problem(p);
  const std::set<std::string> exact = op.exact_keys();
  TuneKey k;
  k.op = p.op;
  k.dtype = dtype_name(p.dtype);
  for (const auto& [name, v] : tp.shape)
    k.shape[name] = exact.count(name) ? v : bucket_size(v);
  k.options = tp.options;
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
    // Integers through int_from_json: a 1e19 or 2.5 is refused, not converted (undefined
    // behaviour for a double past int64).
    for (const auto& [key, v] : j.at("shape").items())
      k.shape[key] = release::int_from_json(v, "tuning key", "shape." + key);
    j.at("options").get_to(k.options);
    j.at("gpu").get_to(k.gpu);
    j.at("arch").get_to(k.arch);
    int64_t sms = release::int_from_json(j.at("sm_count"), "tuning key", "sm_count");
    if (sms < 0 || sms > std::numeric_limits<int>::max())
      throw std::runtime_error("sm_count " + std::to_string(sms) + " is out of range");
    k.sm_count = static_cast<int>(sms);
    j.at("driver").get_to(k.driver);
    j.at("tilepilot").get_to(k.tilepilot);
    return k;
  } catch (const std::exception& e) {
    std::string w = release::plain_error_text(e);
    if (w.rfind("error: ", 0) == 0) w = w.substr(7); // a user error's prefix, mid-sentence
    if (why) *why = "not a tuning key: " + w;
    return std::nullopt;
  }
}

} // namespace tp::autotune
