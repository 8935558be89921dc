// Paired element writes (PairElementWrites.cpp): a parallel loop over a gemm accumulator that
// writes each element into a global tensor takes one paired write per two adjacent columns (a
// 2-element store, or a paired reduction for atomic_add), with the element writes as the
// fallback. Checked on the lowered statements: how many paired and element writes the loop
// issues, and where the pairing must not apply.
#include <gtest/gtest.h>

#include <tilepilot/tilepilot.h>

#include "AccumulatorTile.h"
#include "LoweredBody.h"
#include "ir/IRVisitor.h"

using namespace tp;

namespace {

struct Writes {
  int paired = 0;                 // tp::cg::atomic_add2 calls
  int element = 0;                // tp.atomic_add calls
  int paired_stores = 0;          // tp::cg::store2 calls
  int element_stores = 0;         // element stores into C
  std::vector<std::string> notes; // what `show --stage lowered` says of each loop
};

bool has(const std::vector<std::string>& notes, const std::string& part) {
  for (const std::string& n : notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

Writes lower(const Kernel& kernel, const std::string& arch = "sm_90a") {
  Writes out;
  const ir::Buffer& c = kernel.node().params.at(2);
  ir::for_each_stmt(
      tp::testing::lowered_body(kernel, passes::Target::parse(arch), nullptr, &out.notes),
      [&](const ir::Stmt& st) {
        if (const auto* e = ir::as<ir::Evaluate>(st))
          if (const auto* call = ir::as<ir::Intrinsic>(e->value))
            out.paired += call->name == "tp::cg::atomic_add2_aligned",
                out.element += call->name == "tp.atomic_add",
                out.paired_stores += call->name == "tp::cg::store2_aligned";
        if (const auto* store = ir::as<ir::Store>(st))
          out.element_stores += store->buffer->uid == c->uid;
      });
  return out;
}

enum class Form {
  tile,
  guarded_elements,
  transposed,
  two_adds,
  store,
  cast_store,
  scaled_store,
  shifted_read,
  unrequested_store,
  shared_atomic
};

/// C += A B over 64 x 64 tiles (one warpgroup, a wgmma accumulator on sm_90a), added into C in
/// the given form; `out` is C's dtype.
Kernel splitk(Form form, DType out = f32) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, out);
  auto body = [&](Var bx, Var by) {
    Tile acc = tp::testing::accumulator_64(A, B, by * 64, bx * 64, K);
    if (form == Form::tile) {
      atomic_add(C.tile(by * 64, bx * 64), acc);
      return;
    }
    if (form == Form::shared_atomic) { // added into a shared tile, then copied out
      Tile s = alloc_shared({64, 64}, f32);
      fill(s, 0.0);
      parallel({64, 64}, [&](Var i, Var j) { atomic_add(s(i, j), acc(i, j)); });
      copy(s, C.tile(by * 64, bx * 64));
      return;
    }
    parallel({64, 64}, [&](Var i, Var j) {
      Expr row = by * 64 + i, col = bx * 64 + j;
      if (form == Form::shifted_read) { // each element reads its left neighbour in C
        annotate("paired_stores", "1");
        if_then(row < M && col >= 1 && col < N, [&] { C(row, col) = C(row, col - 1) + acc(i, j); });
        return;
      }
      if (form == Form::store || form == Form::cast_store || form == Form::scaled_store ||
          form == Form::unrequested_store) {
        if (form != Form::unrequested_store) annotate("paired_stores", "1");
        Expr v = form == Form::cast_store     ? cast(out, acc(i, j))
                 : form == Form::scaled_store ? cast(f16, acc(i, j)) // not C's type
                                              : Expr(acc(i, j));
        if_then(row < M && col < N, [&] { C(row, col) = v; });
        return;
      }
      if (form == Form::transposed) // adjacent registers land a row apart
        if_then(col < M && row < N, [&] { atomic_add(C(col, row), acc(i, j)); });
      else
        if_then(row < M && col < N, [&] { atomic_add(C(row, col), acc(i, j)); });
      if (form == Form::two_adds) atomic_add(C(0, 0), acc(i, j));
    });
  };
  return kernel("splitk", {A, B, C}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128), body);
}

} // namespace

TEST(PairElementWrites, TheTileFormPairsAdjacentColumns) {
  Writes a = lower(splitk(Form::tile));
  EXPECT_EQ(a.paired, 1);
  EXPECT_EQ(a.element, 2) << "the fallback: each element under its own guard";
}

TEST(PairElementWrites, GuardedElementAtomicsPairToo) {
  Writes a = lower(splitk(Form::guarded_elements));
  EXPECT_EQ(a.paired, 1);
  EXPECT_EQ(a.element, 2);
}

// Pairs that are not adjacent still take the paired branch's test, which fails at run time; the
// pass does not assume adjacency, it tests it (flat index of the odd register = even's + 1).
TEST(PairElementWrites, AdjacencyIsTestedNotAssumed) {
  Writes a = lower(splitk(Form::transposed));
  EXPECT_EQ(a.paired, 1);
  EXPECT_EQ(a.element, 2);
}

TEST(PairElementWrites, OnlyALoopOfOneAtomicIsPaired) {
  Writes a = lower(splitk(Form::two_adds));
  EXPECT_EQ(a.paired, 0);
  EXPECT_EQ(a.element, 2) << "the loop body as written, per register";
}

TEST(PairElementWrites, Sm80HasNoVectorReductions) {
  Writes a = lower(splitk(Form::tile), "sm_80");
  EXPECT_EQ(a.paired, 0);
  EXPECT_EQ(a.element, 1);
}

TEST(PairElementWrites, OnlyF32HasPairedReductions) {
  Writes a = lower(splitk(Form::tile, DType::i32));
  EXPECT_EQ(a.paired, 0);
  EXPECT_EQ(a.element, 1);
}

TEST(PairElementWrites, GuardedStoresPairInEveryFloatType) {
  for (DType t : {bf16, f16, f32}) {
    Writes a = lower(splitk(Form::store, t));
    EXPECT_EQ(a.paired_stores, 1) << dtype_name(t);
    EXPECT_EQ(a.element_stores, 2) << dtype_name(t) << ": the fallback";
    EXPECT_EQ(a.paired + a.element, 0);
  }
}

TEST(PairElementWrites, ACastToTheDestinationTypeIsTheStoresOwn) {
  Writes a = lower(splitk(Form::cast_store, bf16));
  EXPECT_EQ(a.paired_stores, 1);
}

// An f16 value stored into bf16 rounds twice; the paired store would round once.
TEST(PairElementWrites, AValueOfAnotherTypeStaysElementWise) {
  Writes a = lower(splitk(Form::scaled_store, bf16));
  EXPECT_EQ(a.paired_stores, 0);
  EXPECT_EQ(a.element_stores, 1);
}

TEST(PairElementWrites, Sm80PairsStoresToo) {
  Writes a = lower(splitk(Form::store, bf16), "sm_80");
  EXPECT_EQ(a.paired_stores, 1);
}

// `show --stage lowered` says, per loop over an accumulator that writes global memory, whether
// its writes were paired and if not why, so a user can see why an epilogue runs element-wise.
TEST(PairElementWrites, ShowSaysWhatWasPairedAndWhyNot) {
  Writes tile = lower(splitk(Form::tile));
  // One note of the loop over the accumulator (the others are the operand copies' plans).
  std::vector<std::string> loops;
  for (const std::string& n : tile.notes)
    if (n.find("parallel loop over") != std::string::npos) loops.push_back(n);
  ASSERT_EQ(loops.size(), 1u);
  EXPECT_TRUE(has(loops, "atomic_add into 'C' paired")) << loops[0];
  EXPECT_TRUE(has(lower(splitk(Form::two_adds)).notes, "not paired: the loop body does more"));
  EXPECT_TRUE(has(lower(splitk(Form::scaled_store, bf16)).notes, "the value is f16, not f32"));
  EXPECT_TRUE(has(lower(splitk(Form::tile), "sm_80").notes, "sm_80 has no vector reductions"));
  EXPECT_TRUE(has(lower(splitk(Form::tile, DType::i32)).notes, "only f32 has a paired reduction"));
}

// A value that reads the tensor the loop writes keeps element order: paired, the second element
// would read its left neighbour before the first element's write of it.
TEST(PairElementWrites, AValueReadingTheDestinationStaysElementWise) {
  Writes w = lower(splitk(Form::shifted_read, f32));
  EXPECT_EQ(w.paired_stores, 0);
  EXPECT_TRUE(has(w.notes, "reads the tensor it writes"));
}

// Stores pair only where the kernel asks; without the annotation `show` says how to ask.
TEST(PairElementWrites, StoresPairOnlyOnRequest) {
  Writes w = lower(splitk(Form::unrequested_store, bf16));
  EXPECT_EQ(w.paired_stores, 0);
  EXPECT_EQ(w.element_stores, 1);
  EXPECT_TRUE(has(w.notes, "annotate(\"paired_stores\", \"1\")"));
}

// The paired reduction (red.global.add.v2.f32) exists for global memory only: an atomic_add
// into a shared tile stays element-wise. Paired, the GPU stopped the kernel with
// CUDA_ERROR_INVALID_ADDRESS_SPACE (random programs 663 and 909, H100, 2026-12-07).
TEST(PairElementWrites, AtomicsIntoSharedTilesStayElementWise) {
  Writes w = lower(splitk(Form::shared_atomic));
  EXPECT_EQ(w.paired, 0);
  EXPECT_GE(w.element, 1);
}
