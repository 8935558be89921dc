// What was found when a vendor library (cuBLASLt, cuDNN) was looked up at run time: the file the
// loader picked and the version the library reports about itself. Shared by the cuBLASLt and
// cuDNN loaders, the tests and the benchmark headers.
#pragma once
#include <cstddef>
#include <string>

namespace tp::ops {

struct VendorLibrary {
  std::string name;   // "cuBLASLt", "cuDNN"
  std::string path;   // e.g. /usr/local/cuda/lib64/libcublasLt.so.13
  size_t version = 0; // as the library encodes it: cuDNN 9.14.0 -> 91400, cuBLASLt 13.1.0 -> 130100

  /// "9.14.0". cuBLAS and cuDNN 9 encode major*10000 + minor*100 + patch; cuDNN 8 used major*1000.
  std::string version_text() const {
    size_t major_unit = version < 90000 ? 1000 : 10000;
    return std::to_string(version / major_unit) + "." +
           std::to_string((version % major_unit) / 100) + "." + std::to_string(version % 100);
  }
  /// "cuDNN 9.14.0 (/usr/lib/x86_64-linux-gnu/libcudnn.so.9)".
  std::string describe() const { return name + " " + version_text() + " (" + path + ")"; }
};

} // namespace tp::ops
