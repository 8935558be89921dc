// FieldHasher and xxh64: thin wrappers over xxHash.
#include "runtime/Hash.h"

#include <xxhash.h>

#include "tilepilot/error.h"

namespace tp::rt {

FieldHasher::FieldHasher() : state_(XXH3_createState()) {
  internal_assert(state_) << "XXH3_createState failed";
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

FieldHasher::~FieldHasher() {
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

FieldHasher& FieldHasher::add(std::string_view field) {
  auto* st = static_cast<XXH3_state_t*>(state_);
  uint64_t n = field.size();
  XXH3_128bits_update(st, &n, sizeof n);
  XXH3_128bits_update(st, field.data(), field.size());
  return *this;
}

std::string FieldHasher::hex() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<const XXH3_state_t*>(state_));
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : c.digest) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

uint64_t xxh64(const void* data, size_t bytes, uint64_t seed) {
  return XXH64(data, bytes, seed);
}

} // namespace tp::rt
