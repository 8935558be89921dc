// Helpers shared by the runtime tests: a scratch directory and small kernels.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace tp::rt::test {

/// A fresh directory under the system temp dir, removed with its contents on destruction.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tilepilot-rt-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

/// Sets (or, with nullptr, unsets) an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  bool had;
  std::string old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    const char* v = std::getenv(n);
    had = v != nullptr;
    old = v ? v : "";
    if (value)
      setenv(n, value, 1);
    else
      unsetenv(n);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name.c_str(), old.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

/// A trivial kernel: x[i] = x[i] * a + 1. `tag` lands in a comment so tests can force a
/// distinct cache key.
inline std::string scale_kernel(const std::string& tag = "") {
  return "// " + tag + "\n" + R"(extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + 1.0f;
}
)";
}

/// A string no other test run produces, for cache-miss-first tests.
inline std::string unique_tag() {
  std::random_device rd;
  return "tag-" + std::to_string(rd()) + "-" + std::to_string(rd());
}

} // namespace tp::rt::test
