// TilePilot device library: base definitions shared by every header.
//
// Function-qualifier macros, fixed-width integer types and small constexpr helpers. Valid C++ on
// the host (so layout and swizzle functions can be property-tested there) and under NVRTC with no
// CUDA toolkit headers (cold compile time is a headline metric: keep this file tiny).
#pragma once

#if defined(__CUDACC__)
#define TP_DEVICE __device__ __forceinline__
#define TP_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TP_DEVICE inline
#define TP_HOST_DEVICE inline
#endif

// TP_CUDA: a CUDA compiler reads the file (NVRTC, or either nvcc pass), so the __device__
// wrappers are declared; plain host C++ sees only the pure functions. TP_DEVICE_PASS: device
// code is being generated (NVRTC, nvcc's device pass); selects bodies inside host-device code.
#if defined(__CUDACC__)
#define TP_CUDA 1
#else
#define TP_CUDA 0
#endif
#if defined(__CUDA_ARCH__)
#define TP_DEVICE_PASS 1
#else
#define TP_DEVICE_PASS 0
#endif

#if !defined(__CUDACC_RTC__)
#include <cstdint>
#endif

namespace tp {

#if defined(__CUDACC_RTC__)
// NVRTC without toolkit headers has no <cstdint>; these match its LP64 data model.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
using std::int16_t;
using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::uint16_t;
using std::uint32_t;
using std::uint64_t;
using std::uint8_t;
#endif

static_assert(sizeof(uint16_t) == 2 && sizeof(uint32_t) == 4 && sizeof(uint64_t) == 8,
              "fixed-width integer types have the wrong size");

/// A (row, col) position in a 2-D tile, returned by the layout functions.
struct Coord {
  int row;
  int col;
};

/// is_same<A, B>::value (no <type_traits> under NVRTC).
template <typename A, typename B>
struct is_same {
  static constexpr bool value = false;
};
template <typename A>
struct is_same<A, A> {
  static constexpr bool value = true;
};

/// Ceiling division for non-negative integers.
TP_HOST_DEVICE constexpr int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

} // namespace tp
