// The key of a tuned config: what must match exactly before a stored config is trusted. A config
// tuned for another shape bucket, dtype, mask, GPU, driver or TilePilot version is never reused.
//
// Shape bucketing (bucket_size): a size <= 128 is kept exact; a larger one is rounded up to the
// next power of two (129..256 -> 256, 4097..8192 -> 8192). Small sizes are exact because with
// tiles of 64..256 every small value changes the padding of the last tile and the number of
// blocks sharply, and small sizes (decode, M=1..128) are common and few. Above 128 the best tile
// varies slowly with size, so power-of-two buckets keep a database to ~log2 entries per size
// while the shapes sharing an entry differ by less than 2x. The operator says which keys change
// the kernel itself (Operator::exact_keys: a head dim, a mask flag): those are never bucketed.
// It also says what the key is made of (Operator::tuning_problem: keys folded together or
// dropped). String options are exact.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ops/Operator.h"
#include "tilepilot/runtime.h"

namespace tp::autotune {

int64_t bucket_size(int64_t v);

struct TuneKey {
  std::string op, dtype;
  std::map<std::string, int64_t> shape;       // bucketed as above
  std::map<std::string, std::string> options; // exact
  std::string gpu, arch;                      // "NVIDIA H200", "sm_90a"
  int sm_count = 0;
  std::string driver, tilepilot; // driver version "13.0"; TILEPILOT_VERSION
  bool operator==(const TuneKey&) const = default;

  /// One line, every field, fixed order: what equality means, and what the file name hashes.
  std::string canonical() const;
  /// "gemm-bf16-<16 hex digits of XXH64(canonical)>": a safe file name stem.
  std::string file_stem() const;
  nlohmann::json to_json() const;
  /// nullopt (with *why) when `j` is not a complete key.
  static std::optional<TuneKey> from_json(const nlohmann::json& j, std::string* why);
};

/// The key of problem `p` on device `d`.
TuneKey make_key(const ops::Problem& p, const rt::DeviceInfo& d,
                 const std::string& tilepilot_version = TILEPILOT_VERSION);

} // namespace tp::autotune
