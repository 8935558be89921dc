// Content hashes for the kernel cache and the device-library version (xxHash). Inputs are fed
// field by field with a length prefix, so ("ab", "c") and ("a", "bc") hash differently.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace tp::rt {

/// Streaming XXH3-128 over length-prefixed fields.
class FieldHasher {
public:
  FieldHasher();
  ~FieldHasher();
  FieldHasher(const FieldHasher&) = delete;
  FieldHasher& operator=(const FieldHasher&) = delete;
  FieldHasher& add(std::string_view field);
  /// 32 lowercase hex digits (XXH128 canonical, big-endian) of everything added so far.
  std::string hex() const;

private:
  void* state_; // XXH3_state_t, kept opaque so xxhash.h stays out of this header
};

/// XXH64 of a byte range (seed 0): the checksum of a cache entry.
uint64_t xxh64(const void* data, size_t bytes, uint64_t seed = 0);

} // namespace tp::rt
