// Small file helpers for the pilot's outputs: whole-file read/write (atomic replace) and content
// hashes for manifests.
#pragma once
#include <exception>
#include <string>

namespace tp::release {

/// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half a
/// file. Creates parent folders. User error (naming the path) when it cannot.
void write_text(const std::string& path, const std::string& text);
/// The file's bytes; user error naming the path when it cannot be read.
std::string read_text(const std::string& path);
/// An exception's message for a user: nlohmann's "[json.exception.type_error.302] " tag removed.
std::string plain_error_text(const std::exception& e);
/// XXH64 (seed 0) of bytes as 16 lowercase hex digits.
std::string xxh64_hex(const std::string& bytes);

} // namespace tp::release
