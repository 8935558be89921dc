// IssueAhead's rule on tiny loops: which of a loop's copies may be issued iterations ahead (the
// cp.async plan and fragment-load staging both ask it), and the reason named for each one that
// may not. A copy qualifies when everything it reads is known for a later iteration and it is
// the first access of its destination in the body; the lets its offsets read are collected so
// that the plan can evaluate them again for the later iteration.
#include <gtest/gtest.h>

#include "ir/IRVisitor.h"
#include "passes/BufferAccesses.h"
#include "passes/FlattenLets.h"
#include "passes/IssueAhead.h"
#include "tilepilot/lang.h"

using namespace tp;

namespace {

/// The kernel's one loop and its flattened body, as the plans see them.
struct Loop {
  ir::Stmt body; // the kernel's body, lets flattened; owns what `loop` points to
  const ir::For* loop = nullptr;
  std::vector<ir::Stmt> stmts; // the loop body's top-level statements
  std::set<uint64_t> kernel_writes;
};

Loop find_loop(const Kernel& k) {
  Loop l;
  l.body = passes::flatten_lets(k.node().body);
  ir::for_each_stmt(l.body, [&](const ir::Stmt& s) {
    if (const auto* f = ir::as<ir::For>(s); f && !l.loop) l.loop = f;
  });
  const auto* seq = ir::as<ir::Seq>(l.loop->body);
  l.stmts = seq ? seq->stmts : std::vector<ir::Stmt>{l.loop->body};
  l.kernel_writes = passes::buffer_accesses(l.body).writes;
  return l;
}

/// The blocker of the loop body's `n`-th copy ("" when it can be issued ahead); `lets` gets the
/// names of the lets its offsets read.
std::string blocker(const Kernel& k, int n, std::set<std::string>* let_names = nullptr) {
  Loop l = find_loop(k);
  for (size_t at = 0; at < l.stmts.size(); ++at) {
    if (!ir::as<ir::Copy>(l.stmts[at]) || n-- > 0) continue;
    std::set<const ir::Let*> lets;
    std::string why = passes::issue_ahead_blocker(l.loop, l.stmts, at, l.kernel_writes, lets);
    if (let_names)
      for (const ir::Let* let : lets)
        let_names->insert(ir::as<ir::Variable>(let->var)->name);
    return why;
  }
  ADD_FAILURE() << "the loop has no copy number " << n;
  return "?";
}

Dim M("M"), K("K");

/// One block reading rows of A (and writing Y) in a serial loop whose body is `body`.
Kernel looped(const std::function<void(Var, Tensor&, Tensor&, Tensor&, Tile&, Tile&)>& body) {
  Tensor A("A", {M, K}, f32), Y("Y", {M, K}, f32), Idx("Idx", {M}, i32);
  return kernel("k", {A, Y, Idx}, grid(1), threads(128), [&](Var) {
    Tile s = alloc_shared({16, 32}, f32);
    Tile a = alloc_fragment({16, 32}, f32);
    serial(ceildiv(Expr(K), 32), [&](Var k) { body(k, A, Y, Idx, s, a); });
  });
}

// A copy of a read-only tensor at offsets of the loop variable is the case a pipeline is for.
TEST(IssueAhead, CopyOfAReadOnlyTensorAtLoopOffsetsQualifies) {
  Kernel k = looped([](Var i, Tensor& A, Tensor& Y, Tensor&, Tile& s, Tile& a) {
    copy(A.tile(0, i * 32), s);
    copy(s, a);
    copy(a, Y.tile(0, i * 32));
  });
  EXPECT_EQ(blocker(k, 0), "");
}

// An earlier statement of the body that touches the tile would see the later iteration's data.
TEST(IssueAhead, CopyThatIsNotTheFirstAccessOfItsTileDoesNot) {
  Kernel k = looped([](Var i, Tensor& A, Tensor& Y, Tensor&, Tile& s, Tile& a) {
    copy(s, a);
    copy(A.tile(0, i * 32), s);
    copy(a, Y.tile(0, i * 32));
  });
  EXPECT_EQ(blocker(k, 1),
            "the copy from 'A' into 'shared0' is not the first access of 'shared0' in the "
            "loop's body (an earlier statement would see the next iteration's "
            "data)");
}

// A tensor the kernel also writes may change between the early read and its iteration.
TEST(IssueAhead, CopyOfATensorTheKernelWritesDoesNot) {
  Kernel k = looped([](Var i, Tensor&, Tensor& Y, Tensor&, Tile& s, Tile& a) {
    copy(Y.tile(0, i * 32), s);
    copy(s, a);
    copy(a, Y.tile(16, i * 32));
  });
  EXPECT_EQ(blocker(k, 0),
            "the copy from 'Y' into 'shared0' reads a tensor the kernel writes (a read "
            "issued iterations early could miss those writes)");
}

/// A loop whose copy from A starts at a row the body first stores into a shared tile (row
/// index read from Idx), read directly or through a let of the body.
Kernel row_from_loop_written_tile(bool through_let) {
  Tensor A("A", {M, K}, f32), Y("Y", {M, K}, f32), Idx("Idx", {M}, i32);
  return kernel("k", {A, Y, Idx}, grid(1), threads(128), [&](Var) {
    Tile row = alloc_shared({1}, i32);
    Tile s = alloc_shared({16, 32}, f32);
    Tile a = alloc_fragment({16, 32}, f32);
    serial(ceildiv(Expr(K), 32), [&](Var i) {
      row(0) = Idx(i);
      Expr r = through_let ? Expr(let("r", Expr(row(0)) * 16)) : Expr(row(0));
      copy(A.tile(r, i * 32), s);
      copy(s, a);
      copy(a, Y.tile(0, i * 32));
    });
  });
}

const char* kRowWrittenByTheLoop = "the copy from 'A' into 'shared1': its offsets read shared "
                                   "'shared0', which the loop writes, so its value for a later "
                                   "iteration is not known yet";

// Offsets read through a read-only index tensor are known ahead; through a tile the loop fills,
// they are not.
TEST(IssueAhead, OffsetsThroughAnIndexTensorQualifyThroughALoopWrittenTileDoNot) {
  Kernel by_tensor = looped([](Var i, Tensor& A, Tensor& Y, Tensor& Idx, Tile& s, Tile& a) {
    copy(A.tile(Expr(Idx(i)), i * 32), s);
    copy(s, a);
    copy(a, Y.tile(0, i * 32));
  });
  EXPECT_EQ(blocker(by_tensor, 0), "");
  EXPECT_EQ(blocker(row_from_loop_written_tile(false), 0), kRowWrittenByTheLoop);
}

// Offsets through lets of the body qualify, and every let they read, through other lets too,
// is collected for the plan to evaluate again; a let the offsets do not read is not.
TEST(IssueAhead, LetsTheOffsetsReadAreCollected) {
  Kernel k = looped([](Var i, Tensor& A, Tensor& Y, Tensor&, Tile& s, Tile& a) {
    Var unused = let("unused", i * 7);
    Var col = let("col", i * 32);
    Var col2 = let("col2", col + 0);
    copy(A.tile(0, col2), s);
    copy(s, a);
    copy(a, Y.tile(0, Expr(unused) * 0 + col));
  });
  std::set<std::string> lets;
  EXPECT_EQ(blocker(k, 0, &lets), "");
  EXPECT_EQ(lets, (std::set<std::string>{"col", "col2"}));
}

// A let computed from a tile the loop writes makes the copy's offsets unknown ahead too: the
// rule follows the let to what it reads.
TEST(IssueAhead, LetOfALoopWrittenTileDoesNotQualify) {
  EXPECT_EQ(blocker(row_from_loop_written_tile(true), 0), kRowWrittenByTheLoop);
}

} // namespace
