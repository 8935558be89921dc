// A release folder as runtime dispatch reads it back (written by the pilot, Release.cpp):
//   manifest.json     format, versions, spec, environment, xxh64 of every other file
//   pinned.json       one pinned kernel per tested shape bucket: problem, config, source, cubin;
//                     with objective.route per_shape, "framework_routed" lists the tested
//                     buckets the pilot measured the framework faster at (no kernel pinned)
//   test_matrix.json  per device: every tested (shape, dtype) with its results
//   fallback.json     the fallback operator and the reasons dispatch falls back
//   kernels/          generated CUDA source and cubin of each pinned entry
// A bucket is one tested problem (exact shape keys, options and dtype).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ops/Operator.h"

namespace tp::release {

inline constexpr const char* kReleaseFormat = "tilepilot-release/1";

nlohmann::json problem_to_json(const ops::Problem& p);
/// XXH64 of a manifest's "files" object as "path\nhash\n" lines in path order: the manifest's
/// files_xxh64, so that removing a line from the list is detected too.
std::string file_list_hash(const nlohmann::json& files);
/// User error naming `where` when the JSON is not a valid problem.
ops::Problem problem_from_json(const nlohmann::json& j, const std::string& where);
/// A JSON integer; user error naming `where` and `what` for anything else. A fraction, 1e30 or
/// a number past int64 is refused, never truncated or overflowed (undefined behaviour).
int64_t int_from_json(const nlohmann::json& v, const std::string& where, const std::string& what);
/// A config object {knob: integer}, as int_from_json reads each value.
ops::Config config_from_json(const nlohmann::json& j, const std::string& where);

struct PinnedEntry {
  ops::Problem problem;
  ops::Config config;
  std::string source_file, cubin_file; // paths inside the release folder; "" when not produced
};

/// A tested bucket served by the framework: the pilot measured it faster there.
struct FrameworkRouted {
  ops::Problem problem;
  double kernel_speedup = 0; // framework time / kernel time, as measured (< 1)
};

struct MatrixEntry {
  std::string device; // arch, e.g. sm_90a
  ops::Problem problem;
  bool passed = false;
  double max_abs_err = 0;
};

struct Release {
  std::string dir, op, device;
  nlohmann::json manifest;
  std::vector<PinnedEntry> pinned;
  std::vector<FrameworkRouted> framework_routed;
  std::vector<MatrixEntry> matrix;
  std::string fallback; // the fallback operator, e.g. "cuBLASLt"
  std::vector<std::string> fallback_reasons;

  /// The pinned entry for a problem on a device arch, or nullptr with the reason dispatch
  /// falls back (wrong device, dtype or shape outside the tested matrix, test failed, the
  /// framework measured faster).
  const PinnedEntry* find(const std::string& arch, const ops::Problem& p,
                          std::string* why_not) const;
  /// The framework-routed entry for exactly this problem, or nullptr.
  const FrameworkRouted* routed_to_framework(const ops::Problem& p) const;
  /// "the pilot measured cuBLASLt faster at shape ... (kernel 0.62x)".
  std::string framework_faster_text(const FrameworkRouted& f) const;
};

/// Reads a release folder and checks it against its manifest: the manifest lists exactly the
/// folder's regular files (an unlisted, missing or changed file, a changed file list, a FIFO,
/// device or symbolic link makes the release invalid; special files are never opened). User
/// error naming the file and the reason otherwise.
Release load_release(const std::string& dir);

} // namespace tp::release
