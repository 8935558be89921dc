// A differential case (DifferentialCases.h): a small kernel, its arguments and the expected
// result computed from the rule in plain C++ loops, and the helpers the cases share.
//
// Inputs are small integers (exact in bf16, and every sum here is exact in f32), so copies,
// gemms, reductions and atomics can be compared exactly; outputs start as a sentinel, so a
// write outside the rule's elements shows up.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tilepilot/lang.h"
#include "tilepilot/tensor.h"

namespace tp::difftest {

constexpr double kSentinel = 777.0;

struct DiffCase {
  std::string name; // the rule, as a test name (docs/semantics.md names it)
  Kernel kernel;
  std::vector<HostTensor> args; // in parameter order; outputs hold the sentinel
  std::vector<int> outputs;     // parameter indices compared
  /// Writes the rule's result into `args` (a copy of the arguments above), in place.
  std::function<void(std::vector<HostTensor>&)> expect;
  double tol = 0; // absolute tolerance; 0 = exact
};

/// Deterministic small integers in [-2, 2].
inline void fill_ints(HostTensor& t, int seed) {
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, static_cast<double>((i * 7 + seed * 13 + (i / 5) * 3) % 5 - 2));
}
inline HostTensor ints(DType d, std::vector<int64_t> shape, int seed) {
  HostTensor t(d, std::move(shape));
  fill_ints(t, seed);
  return t;
}
inline HostTensor sentinel(DType d, std::vector<int64_t> shape) {
  HostTensor t(d, std::move(shape));
  t.fill(kSentinel);
  return t;
}

/// sum_k A[r][k] * B[k][c] with A [M, K], B [K, N] row-major; rows/cols outside give 0.
inline double dot(const HostTensor& A, const HostTensor& B, int64_t r, int64_t c) {
  int64_t M = A.shape()[0], K = A.shape()[1], N = B.shape()[1];
  if (r < 0 || r >= M || c < 0 || c >= N) return 0;
  double s = 0;
  for (int64_t k = 0; k < K; ++k)
    s += A.get(r * K + k) * B.get(k * N + c);
  return s;
}

/// A gemm kernel over 64 x 64 blocks (k-steps of 32); `epilogue` writes acc to C.
inline Kernel gemm_kernel(const std::string& name,
                          std::function<void(Tile&, Tensor&, Var, Var)> epilogue,
                          KernelOptions opts = {}, DType c_dtype = f32) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, c_dtype);
  return kernel(
      name, {A, B, C}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
      [&](Var bx, Var by) {
        Tile As = alloc_shared({64, 32}, bf16);
        Tile Bs = alloc_shared({32, 64}, bf16);
        Tile acc = alloc_fragment({64, 64}, f32);
        clear(acc);
        pipelined(ceildiv(K, 32), 2, [&](Var k) {
          copy(A.tile(by * 64, k * 32), As);
          copy(B.tile(k * 32, bx * 64), Bs);
          gemm(As, Bs, acc);
        });
        epilogue(acc, C, bx, by);
      },
      opts);
}

inline DiffCase gemm_case(const std::string& name, int64_t M, int64_t N, int64_t K,
                          std::function<void(Tile&, Tensor&, Var, Var)> epilogue,
                          std::function<void(std::vector<HostTensor>&)> expect) {
  DiffCase c;
  c.name = name;
  c.kernel = gemm_kernel(name, std::move(epilogue));
  c.args = {ints(bf16, {M, K}, 1), ints(bf16, {K, N}, 2), sentinel(f32, {M, N})};
  c.outputs = {2};
  c.expect = std::move(expect);
  return c;
}

/// The first element where `got` and `want` differ by more than `tol`, as a message; empty when
/// they agree everywhere (NaN never agrees).
inline std::string first_mismatch(const HostTensor& got, const HostTensor& want, double tol) {
  if (got.shape() != want.shape()) return "shapes differ";
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get(i), w = want.get(i);
    if (!(std::fabs(g - w) <= tol))
      return "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
             std::to_string(w);
  }
  return "";
}

} // namespace tp::difftest
