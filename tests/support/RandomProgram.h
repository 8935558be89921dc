// A deterministic generator of random small, valid tile programs (issue 14 §2, issue 18 §4),
// built through the public builder only. A program has 1-4 global tensors of odd extents
// (1..70, rarely multiples of the tile), tiles in every scope, and a random mix of copies
// (whole tiles and regions, edge tiles out of bounds), element-wise math, reductions, gemms,
// fills, block-index conditionals, selects, atomics and serial / unrolled / pipelined loops.
// Values stay small integers (clamped where they could grow), so both backends compute them
// exactly in f32 and results compare bit for bit; exp2 is the one inexact op (a tolerance).
// Each block writes only its own box of every output, so outputs are deterministic.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tilepilot/lang.h"
#include "tilepilot/tensor.h"

namespace tp::testing {

struct GenOptions {
  int max_stmts = 7; // top-level statements before the stores of the outputs
  int max_depth = 2; // nesting of loops and conditionals
  bool gemm = true, reduce = true, atomics = true, loops = true, pipelined = true;
  bool conditionals = true, select = true, casts = true, exp2 = true, regions = true;
  bool dims = true;  // tensor extents as Dims bound at launch (else constants)
  bool rank3 = true; // 3-d tensors and tiles
  // Constructs that known bugs break (issue 14 (a)-(d) and alloc_local); on by default so that
  // the tests can turn them on once the fixes are merged.
  // (a) regions of fragments: copy(frag.region(..), G.tile(..)), and the same family found by
  // this generator: region copies to or from a fragment and fill(frag.region(..)) act on the
  // whole register fragment on CUDA, and a region with a unit dimension is an internal error
  // ("copy coordinates do not match the box", LowerCopy.cpp).
  bool frag_regions = true;
  // Found by this generator: a gemm with N = 8 (B's rows 16 bytes) on sm_90a is an internal
  // error, "wgmma operand ... is not swizzled" (LowerGemm.cpp).
  bool narrow_wgmma_b = true;
  bool tile_atomic_edge = true;     // (b) tile atomic_add whose box crosses a tensor's edge
  bool guarded_select_loads = true; // (c) select(in_bounds, A(r, c), 0)
  bool rank5 = true;                // (d) a 5-d input tensor read element-wise
  bool local_tiles = true;          // alloc_local (CUDA: no shared layout for local tiles)
  bool ws_shared_index = true;      // (e) a pipelined copy's offset read from a shared tile
};

struct ArgSpec {
  enum class Role { input, output, accum }; // accum: read-modify-write by atomics only
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  Role role = Role::input;
};

struct RandomProgram {
  uint64_t seed = 0;
  Kernel kernel;
  std::vector<ArgSpec> args; // parameter order
  /// Largest absolute error a correct backend may show in an output (0 = bit-exact) and the
  /// relative part; nonzero only when the program uses exp2.
  double atol = 0, rtol = 0;
  /// Constructs the program uses, by name ("gemm", "pipelined", "local", "frag_region_store",
  /// ...), for statistics and to skip known-bug subsets.
  std::vector<std::string> features;
  bool uses(const std::string& f) const;
};

/// The program for `seed`: the same seed and options always give the same program.
RandomProgram make_random_program(uint64_t seed, const GenOptions& o = {});

/// Arguments for `p`: inputs hold small random integers (deterministic per seed), outputs are
/// poisoned (NaN / INT32_MIN), accumulators hold small integers too.
std::vector<HostTensor> make_args(const RandomProgram& p, uint64_t seed);

/// "" when `got` matches `want` on every output and accumulator (NaN matches NaN: elements no
/// block writes stay poisoned on both sides); else the first difference: tensor, index, values.
std::string compare_outputs(const RandomProgram& p, const std::vector<HostTensor>& want,
                            const std::vector<HostTensor>& got);

/// The program as text (ir::to_string of the kernel) with its argument shapes, for reports.
std::string describe(const RandomProgram& p);

} // namespace tp::testing
