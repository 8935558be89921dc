// Deterministic input mutations for the reader fuzz driver: bit flips, interesting bytes and
// tokens, truncation, deleted and duplicated ranges, splices of two seeds and token swaps. The
// same generator state gives the same mutant, so an iteration can be replayed from its number.
#pragma once
#include <random>
#include <string>
#include <vector>

namespace tp::fuzz {

using Rng = std::mt19937_64;

/// `seed` mutated 1-4 times; `others` are the other seeds, for splices and borrowed tokens.
/// The result is at most `max_size` bytes.
std::string mutate(const std::string& seed, const std::vector<std::string>& others, Rng& rng,
                   size_t max_size = 1 << 20);

} // namespace tp::fuzz
