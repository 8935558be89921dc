// Helpers for dispatch tests: release folders written the way the pilot writes them (manifest
// with content hashes), problems from shape text, and a log sink that keeps every line.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "ops/Operator.h"
#include "release/Files.h"
#include "release/ReleaseManifest.h"
#include "tilepilot/dispatch.h"
#include "tilepilot/interpret.h"

namespace tp::test {

struct ReleaseCase {
  ops::Problem problem;
  ops::Config config;
  bool passed = true;
  bool pinned = true; // an entry in pinned.json
  double framework_faster = 0; // > 0: listed in framework_routed, the kernel at this speedup
};

inline ops::Problem problem(const std::string& op, const std::string& shape,
                            DType dt = DType::bf16) {
  return ops::find_operator(op).parse(ops::parse_kv(shape, "shape"), dt);
}

/// `t` [B, H, S, D] copied into a [B, S, H, D + pad] buffer (`base`, its padding -7), and the
/// view of it that reads as `t`: what a model's projection, viewed per head, hands to attention.
inline HostView heads_view(const HostTensor& t, HostTensor& base, int64_t pad) {
  const int64_t B = t.shape()[0], H = t.shape()[1], S = t.shape()[2], D = t.shape()[3];
  const int64_t pitch = D + pad;
  base = HostTensor(t.dtype(), {B, S, H, pitch});
  base.fill(-7); // the padding must never be read into a result
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          base.set(((b * S + s) * H + h) * pitch + d, t.get(((b * H + h) * S + s) * D + d));
  return HostView{&base, 0, t.shape(), {S * H * pitch, pitch, H * pitch, 1}};
}

/// A fresh, empty folder under the system temp dir.
inline std::string temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("tilepilot-dispatch-test-" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

/// Writes a release folder for `op` on (`gpu`, `arch`) holding `cases`; returns `dir`.
inline std::string write_release(const std::string& dir, const std::string& op,
                                 const std::string& arch, const std::string& gpu,
                                 const std::vector<ReleaseCase>& cases) {
  nlohmann::json pinned = {{"entries", nlohmann::json::array()}};
  nlohmann::json tested = nlohmann::json::array();
  for (const ReleaseCase& c : cases) {
    if (c.pinned)
      pinned["entries"].push_back(
          {{"problem", release::problem_to_json(c.problem)}, {"config", c.config}});
    if (c.framework_faster > 0)
      pinned["framework_routed"].push_back({{"problem", release::problem_to_json(c.problem)},
                                            {"warm", {{"speedup", c.framework_faster}}}});
    tested.push_back({{"problem", release::problem_to_json(c.problem)},
                      {"correctness", {{"passed", c.passed}, {"max_abs_err", 0.0}}}});
  }
  std::map<std::string, std::string> files = {
      {"pinned.json", pinned.dump(2)},
      {"test_matrix.json",
       nlohmann::json{{"operator", op}, {"devices", {{arch, {{"cases", tested}}}}}}.dump(2)},
      {"fallback.json",
       nlohmann::json{{"operator", "vendor"}, {"reasons", {"outside the matrix"}}}.dump(2)}};
  nlohmann::json manifest = {
      {"format", release::kReleaseFormat},
      {"operator", op},
      {"device", arch},
      {"environment", {{"gpus", nlohmann::json::array({{{"name", gpu}, {"arch", arch}}})}}},
      {"files", nlohmann::json::object()}};
  for (const auto& [path, text] : files) {
    release::write_text(dir + "/" + path, text);
    manifest["files"][path] = {{"xxh64", release::xxh64_hex(text)}, {"bytes", text.size()}};
  }
  release::write_text(dir + "/manifest.json", manifest.dump(2));
  return dir;
}

/// Dispatch options whose log lines land in `lines`.
inline ops::DispatchOptions capture_log(std::vector<std::string>* lines) {
  ops::DispatchOptions o;
  o.log = [lines](const std::string& s) { lines->push_back(s); };
  return o;
}

} // namespace tp::test
