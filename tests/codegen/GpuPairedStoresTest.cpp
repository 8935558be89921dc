// Paired stores of a gemm accumulator on the GPU (passes::Target::even_rows): the variant for
// even rows (no alignment test, no element-wise fallback) and the general one write exactly what
// the interpreter writes, and nothing outside the output's view. One CompiledKernel takes both
// variants across launches: even and odd row lengths, views with even and odd row pitches, and
// a store at a column offset no compiler can prove even. Inputs are small integers, so every
// f32 sum is exact and bf16 outputs round the same way on both backends.
#include <gtest/gtest.h>

#include <tilepilot/tilepilot.h>

#include "DifferentialCases.h"

using namespace tp;
using namespace tp::difftest;

namespace {

/// C = A B over 64 x 64 tiles (pipelined, wgmma), stored at column bx * 64 + shift. C is
/// declared strided (views allowed) unless `dense`.
Kernel shifted_gemm(DType out, bool dense = false) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16);
  Tensor C = dense ? Tensor("C", {M, N}, out) : Tensor("C", {M, N}, out, strided);
  Scalar shift("shift", i32);
  return kernel("paired_gemm", {A, B, C, shift}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                [&](Var bx, Var by) {
                  Tile as = alloc_shared({64, 32}, bf16), bs = alloc_shared({32, 64}, bf16);
                  Tile acc = alloc_fragment({64, 64}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, 32), 2, [&](Var k) {
                    copy(A.tile(by * 64, k * 32), as);
                    copy(B.tile(k * 32, bx * 64), bs);
                    gemm(as, bs, acc);
                  });
                  copy(acc, C.tile(by * 64, bx * 64 + shift));
                });
}

uint64_t at(const DeviceArray& a, int64_t elem, DType t) {
  return a.tensor().ptr + static_cast<uint64_t>(elem * dtype_bytes(t));
}

struct Case {
  int64_t M, N, K;
  int64_t pitch;  // C's row pitch in a [M, pitch] buffer; pitch == N: contiguous
  int64_t offset; // C's first element in that buffer (a 16-byte multiple for a view)
  int shift;
};

void run(CompiledKernel& ck, const Kernel& k, DType out, const Case& c) {
  HostTensor a = ints(bf16, {c.M, c.K}, 1), b = ints(bf16, {c.K, c.N}, 2);
  HostTensor buf = sentinel(out, {c.M + 1, c.pitch});
  HostTensor want = buf;
  const bool view = c.pitch != c.N || c.offset != 0;
  HostView cv{&want, c.offset, {c.M, c.N}, {c.pitch, 1}};
  // The interpreter writes through a view in every case: the buffer has a spare sentinel row
  // (anything written past the output shows), so the whole buffer is not the output.
  interpret(k, {a, b, cv, c.shift});
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b), dc = DeviceArray::from(buf);
  DeviceTensor ct = view ? DeviceTensor(at(dc, c.offset, out), out, {c.M, c.N}, {c.pitch, 1})
                         : DeviceTensor(dc.tensor().ptr, out, {c.M, c.N});
  ck.launch({da, db, ct, c.shift});
  synchronize();
  HostTensor got = dc.to_host();
  EXPECT_EQ(first_mismatch(got, want, 0), "")
      << dtype_name(out) << " M " << c.M << " N " << c.N << " pitch " << c.pitch << " offset "
      << c.offset << " shift " << c.shift;
}

} // namespace

TEST(GpuPairedStores, EvenAndOddRowsMatchTheInterpreter) {
  for (DType out : {bf16, f32}) {
    Kernel k = shifted_gemm(out);
    CompiledKernel ck = compile(k);
    const int64_t off = 16 / dtype_bytes(out); // one 16-byte step: a view's aligned start
    for (const Case& c : {
             Case{130, 96, 72, 96, 0, 0},    // contiguous, even rows: the even variant
             Case{130, 95, 72, 95, 0, 0},    // odd rows: the general variant
             Case{77, 200, 40, 200, 0, 0},   // even again, a ragged last tile both ways
             Case{130, 96, 72, 120, off, 0}, // a view, even pitch and rows
             Case{130, 95, 72, 120, off, 0}, // a view with an odd row length
             Case{130, 96, 72, 121, off, 0}, // a view with an odd pitch
             Case{130, 96, 72, 96, 0, 1},    // a column offset not provably even: general code
             Case{130, 94, 72, 96, 0, 2},    // an even offset through a scalar: still general
         })
      run(ck, k, out, c);
  }
}

// A contiguous output may start at an odd element (a slice passed as its own tensor): its pairs
// are not aligned whatever the row length, so the launch takes the general variant.
TEST(GpuPairedStores, AContiguousOutputAtAnOddAddressMatchesTheInterpreter) {
  for (DType out : {bf16, f32}) {
    Kernel k = shifted_gemm(out, true);
    CompiledKernel ck = compile(k);
    const int64_t M = 130, N = 96, K = 72;
    for (int64_t offset : {0, 1}) {
      HostTensor a = ints(bf16, {M, K}, 1), b = ints(bf16, {K, N}, 2);
      HostTensor buf = sentinel(out, {M * N + 2});
      HostTensor want = buf;
      interpret(k, {a, b, HostView{&want, offset, {M, N}, {N, 1}}, 0});
      DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b), dc = DeviceArray::from(buf);
      ck.launch({da, db, DeviceTensor(at(dc, offset, out), out, {M, N}), 0});
      synchronize();
      EXPECT_EQ(first_mismatch(dc.to_host(), want, 0), "")
          << dtype_name(out) << " offset " << offset;
    }
  }
}
