// One kernel that uses every primitive of the 8- and 4-bit dtypes, the bit operators and the
// accurate math functions, with inputs that reach their edge cases (NaN, infinities, values
// past the fp8 and integer ranges, every fp8 and int4 bit pattern, negative and out-of-range
// shift counts). Shared by the interpreter test, the NVRTC compile test and the GPU test.
#pragma once
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tilepilot/tensor.h"
#include "tilepilot/tilepilot.h"

namespace tp::test {

constexpr int64_t kPrimN = 256;

// Parameters, in order: inputs, then outputs (rows of each output are listed where written).
enum PrimArg {
  pX,
  pI,
  pS,
  pQ,
  pW,
  pE4,
  pE5,
  pH,
  pB, // inputs
  pBits,
  pO4,
  pO5,
  pFp,
  pI8,
  pU8,
  pQo,
  pMath,
  pCopy, // outputs
  kPrimArgs
};
constexpr int kPrimFirstOutput = pBits;

inline Kernel primitives_kernel() {
  const int64_t N = kPrimN;
  Tensor X("X", {N}, f32), I("I", {N}, i32), S("S", {N}, i32), Q("Q", {N}, int4), W("W", {N}, u8),
      E4("E4", {N}, fp8_e4m3), E5("E5", {N}, fp8_e5m2), H("H", {N}, f16), B("B", {N}, bf16);
  Tensor Bits("Bits", {8, N}, i32), O4("O4", {4, N}, fp8_e4m3), O5("O5", {4, N}, fp8_e5m2),
      Fp("Fp", {6, N}, f32), I8("I8", {3, N}, i8), U8("U8", {3, N}, u8), Qo("Qo", {5, N}, i32),
      Math("Math", {4, N}, f32), Copy("Copy", {2, N}, f32);
  return kernel("primitives",
                {X, I, S, Q, W, E4, E5, H, B, Bits, O4, O5, Fp, I8, U8, Qo, Math, Copy}, grid(1),
                threads(128), [&](Var) {
                  parallel({N}, [&](Var i) {
                    Expr x = X(i), a = I(i), s = S(i);
                    Bits(0, i) = a & s;
                    Bits(1, i) = a | s;
                    Bits(2, i) = a ^ s;
                    Bits(3, i) = ~a;
                    Bits(4, i) = a << s; // counts outside [0, 32) are taken modulo 32
                    Bits(5, i) = a >> s; // arithmetic
                    Bits(6, i) = Expr(W(i)) >> (s & 7);
                    Bits(7, i) = a << 3;
                    for (const Tensor* o : {&O4, &O5}) {
                      (*o)(0, i) = x;
                      (*o)(1, i) = H(i);
                      (*o)(2, i) = B(i);
                      (*o)(3, i) = a; // i32 -> f32 (nearest) -> fp8
                    }
                    Fp(0, i) = E4(i);
                    Fp(1, i) = E5(i);
                    Fp(2, i) = cast(f16, E4(i)) * 2.0f;
                    Fp(3, i) = cast(bf16, E5(i));
                    Fp(4, i) = cast(fp8_e4m3, x);
                    Fp(5, i) = cast(fp8_e5m2, x * 1000.0f);
                    I8(0, i) = x * 200.0f; // float -> i8: truncate, saturate, NaN -> 0
                    I8(1, i) = a;          // integers saturate too
                    I8(2, i) = Expr(W(i)) - 128;
                    U8(0, i) = x * 300.0f;
                    U8(1, i) = a;
                    U8(2, i) = pack_int4(Q(i), a);
                    Qo(0, i) = Q(i);
                    Qo(1, i) = unpack_int4(W(i), 0);
                    Qo(2, i) = unpack_int4(W(i), 1);
                    Qo(3, i) = cast(int4, x * 10.0f);
                    Qo(4, i) = cast(i32, E4(i));
                    Math(0, i) = tanh(x);
                    Math(1, i) = erf(x);
                    Math(2, i) = sigmoid(x * 4.0f);
                    Math(3, i) = pow(abs(x) + 0.25f, x * 2.0f);
                  });
                  // Tile copies convert: int4 -> f16 shared tile -> f32, and an fp8 shared tile.
                  Tile tq = alloc_shared({N}, f16);
                  copy(Q.tile(0), tq);
                  copy(tq, Copy.tile(0, 0));
                  Tile t8 = alloc_shared({N}, fp8_e4m3);
                  copy(E4.tile(0), t8);
                  copy(t8, Copy.tile(1, 0));
                });
}

/// A pipelined loop over a tensor of a 1-byte dtype `t` through a shared tile (TMA-loaded on
/// sm_90a, as UINT8 boxes) into a fragment: C[M, 64] = sum over k-blocks of A's 64x64 tiles.
inline Kernel one_byte_pipeline_kernel(DType t) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, t), C("C", {M, 64}, f32);
  return kernel("pipe8", {A, C}, grid(ceildiv(M, 64)), threads(128), [&](Var bx) {
    Tile acc = alloc_fragment({64, 64}, f32);
    clear(acc);
    Tile s = alloc_shared({64, 64}, t);
    pipelined(ceildiv(N, 64), 2, [&](Var ko) {
      copy(A.tile(bx * 64, ko * 64), s);
      Tile f = alloc_fragment({64, 64}, f32);
      copy(s, f);
      parallel({64, 64}, [&](Var i, Var j) { acc(i, j) = acc(i, j) + f(i, j); });
    });
    copy(acc, C.tile(bx * 64, 0));
  });
}

/// Inputs with every special case in the first elements, random values after them.
inline std::vector<HostTensor> primitives_args(uint64_t seed) {
  const int64_t N = kPrimN;
  std::vector<HostTensor> a;
  auto add = [&](DType t, std::vector<int64_t> shape) { a.emplace_back(t, std::move(shape)); };
  add(f32, {N}), add(i32, {N}), add(i32, {N}), add(int4, {N}), add(u8, {N}), add(fp8_e4m3, {N});
  add(fp8_e5m2, {N}), add(f16, {N}), add(bf16, {N});
  add(i32, {8, N}), add(fp8_e4m3, {4, N}), add(fp8_e5m2, {4, N}), add(f32, {6, N});
  add(i8, {3, N}), add(u8, {3, N}), add(i32, {5, N}), add(f32, {4, N}), add(f32, {2, N});
  std::mt19937_64 rng(seed);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {0.0f,     -0.0f,       NAN,        inf,    -inf,    1e30f,
                                      -1e30f,   448.0f,      449.0f,     464.0f, -500.0f, 1e-8f,
                                      -1e-8f,   0.6f,        -0.65f,     1.28f,  1.2751f, 57344.0f,
                                      61440.0f, 2.0f / 1024, 3.0f / 1024};
  std::uniform_real_distribution<float> ud(-3.0f, 3.0f);
  for (int64_t i = 0; i < N; ++i)
    a[pX].set(i, i < static_cast<int64_t>(special.size()) ? special[i] : ud(rng));
  std::uniform_int_distribution<int32_t> any(std::numeric_limits<int32_t>::min(),
                                             std::numeric_limits<int32_t>::max());
  for (int64_t i = 0; i < N; ++i) {
    a[pI].set(i, i < 8 ? std::vector<double>{0, -1, 1, 127, 128, -129, 255, 2147483647}[i]
                       : static_cast<double>(any(rng)));
    a[pS].set(i, static_cast<double>(static_cast<int64_t>(rng() % 81) - 40));
  }
  a[pQ].fill_random(seed + 1, -8, 8);
  // Every bit pattern of the byte-sized inputs (N = 256).
  for (int p : {pW, pE4, pE5})
    for (int64_t i = 0; i < N; ++i)
      static_cast<uint8_t*>(a[p].data())[i] = static_cast<uint8_t>(i);
  a[pH].fill_random(seed + 2, -600, 600);
  a[pB].fill_random(seed + 3, -70000, 70000);
  for (int p = kPrimFirstOutput; p < kPrimArgs; ++p)
    a[p].poison();
  return a;
}

/// Values equal, or both NaN.
inline bool same_value(double x, double y) {
  return x == y || (std::isnan(x) && std::isnan(y));
}

/// Distance in units in the last place between two f32 values (0 when both are NaN or equal).
inline int64_t ulp_distance(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y) ? 0 : INT64_MAX;
  if (x == y) return 0;
  auto key = [](float f) {
    int32_t b = std::bit_cast<int32_t>(f);
    return b < 0 ? static_cast<int64_t>(INT32_MIN) - b : static_cast<int64_t>(b);
  };
  int64_t d = key(x) - key(y);
  return d < 0 ? -d : d;
}

} // namespace tp::test
