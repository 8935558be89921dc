// InsertBarriers on tiny kernels: where the block-wide barriers go. A barrier separates a write
// of a shared tile from a later read or write of it (and a read from a later write), within a
// statement list and across a loop's iterations; reads after reads, register fragments and
// element-wise loop bodies get none; tiles a pipeline plan orders by its own means (TMA
// mbarriers, the cp.async wait) get none. The property is checked on the IR the pass returns,
// summarized statement by statement, not on generated source. Tiles are named as the builder
// names them, by scope and allocation order: shared0, frag1, ...
#include <gtest/gtest.h>

#include "ir/IRVisitor.h"
#include "passes/FlattenLets.h"
#include "passes/InferLayouts.h"
#include "passes/InsertBarriers.h"
#include "passes/PlanPipeline.h"
#include "tilepilot/lang.h"

using namespace tp;

namespace {

bool is_barrier(const ir::Stmt& s) {
  const auto* e = ir::as<ir::Evaluate>(s);
  const auto* i = e ? ir::as<ir::Intrinsic>(e->value) : nullptr;
  return i && i->name == "tp.barrier";
}

std::string summary(const ir::Stmt& s);

/// A statement list as one token per statement: "|" a barrier, "copy(X>Y)", "par", "for{...}",
/// "if{...}", "reduce(X>Y)", "gemm", "fill(X)", "store(X)"; allocations and lets are left out.
std::string summary(const std::vector<ir::Stmt>& stmts) {
  std::string out;
  for (const ir::Stmt& s : stmts) {
    std::string t = summary(s);
    if (t.empty()) continue;
    if (!out.empty()) out += ' ';
    out += t;
  }
  return out;
}

std::string summary(const ir::Stmt& s) {
  if (!s.defined()) return "";
  if (is_barrier(s)) return "|";
  if (const auto* q = ir::as<ir::Seq>(s)) return summary(q->stmts);
  if (const auto* c = ir::as<ir::Copy>(s))
    return "copy(" + c->src.buffer->name + ">" + c->dst.buffer->name + ")";
  if (const auto* f = ir::as<ir::For>(s)) return "for{" + summary(f->body) + "}";
  if (const auto* i = ir::as<ir::IfThenElse>(s)) {
    std::string e = summary(i->else_case);
    return "if{" + summary(i->then_case) + (e.empty() ? "" : "}else{" + e) + "}";
  }
  if (ir::as<ir::Parallel>(s)) return "par";
  if (const auto* r = ir::as<ir::Reduce>(s))
    return "reduce(" + r->src->name + ">" + r->dst->name + ")";
  if (ir::as<ir::Gemm>(s)) return "gemm";
  if (const auto* f = ir::as<ir::Fill>(s)) return "fill(" + f->dst.buffer->name + ")";
  if (const auto* st = ir::as<ir::Store>(s)) return "store(" + st->buffer->name + ")";
  if (const auto* l = ir::as<ir::Let>(s)) return summary(l->body);
  return "";
}

/// The kernel's body after barrier insertion, as Lower.cpp runs it (lets flattened, layouts
/// inferred and the pipeline planned for `arch` first).
std::string barriers(const Kernel& k, const std::string& arch = "sm_80") {
  passes::Target t = passes::Target::parse(arch);
  ir::KernelNode kn = k.node();
  kn.body = passes::flatten_lets(kn.body);
  passes::LayoutInfo l = passes::infer_layouts(kn, t);
  passes::PipelinePlan p = passes::plan_pipeline(kn, l, t);
  return summary(passes::insert_barriers(kn, l, p));
}

Dim M("M"), N("N");

/// A one-block kernel over [M, N] f32 tensors X and Y whose body is `body`.
Kernel one_block(const std::function<void(Tensor&, Tensor&)>& body) {
  Tensor X("X", {M, N}, f32), Y("Y", {M, N}, f32);
  return kernel("k", {X, Y}, grid(1), threads(128), [&](Var) { body(X, Y); });
}

// A shared tile written and then read: one barrier between, none before the write.
TEST(InsertBarriers, ReadAfterWriteOfASharedTileIsSeparated) {
  Kernel k = one_block([](Tensor& X, Tensor& Y) {
    Tile s = alloc_shared({32, 32}, f32);
    copy(X.tile(0, 0), s);
    copy(s, Y.tile(0, 0));
  });
  EXPECT_EQ(barriers(k), "copy(X>shared0) | copy(shared0>Y)");
}

// Two reads of one shared tile need nothing between them; the write before both needs one.
TEST(InsertBarriers, ReadsAfterReadsAreNotSeparated) {
  Kernel k = one_block([](Tensor& X, Tensor& Y) {
    Tile s = alloc_shared({32, 32}, f32);
    Tile a = alloc_fragment({32, 32}, f32), b = alloc_fragment({32, 32}, f32);
    copy(X.tile(0, 0), s);
    copy(s, a);
    copy(s, b);
    parallel({32, 32}, [&](Var i, Var j) { a(i, j) = a(i, j) + b(i, j); });
    copy(a, Y.tile(0, 0));
  });
  EXPECT_EQ(barriers(k),
            "copy(X>shared0) | copy(shared0>frag1) copy(shared0>frag2) par copy(frag1>Y)");
}

// A write after a read (the tile reused for other data) is separated too: the second copy into
// s must not overwrite what a slower warp has not read yet.
TEST(InsertBarriers, WriteAfterReadIsSeparated) {
  Kernel k = one_block([](Tensor& X, Tensor& Y) {
    Tile s = alloc_shared({32, 32}, f32);
    Tile a = alloc_fragment({32, 32}, f32);
    copy(X.tile(0, 0), s);
    copy(s, a);
    copy(X.tile(32, 0), s);
    copy(s, Y.tile(0, 0));
    copy(a, Y.tile(32, 0));
  });
  EXPECT_EQ(barriers(k),
            "copy(X>shared0) | copy(shared0>frag1) | copy(X>shared0) | copy(shared0>Y) "
            "copy(frag1>Y)");
}

// Register fragments are private to their threads' layout: no barrier orders them.
TEST(InsertBarriers, RegisterFragmentsNeedNoBarrier) {
  Kernel k = one_block([](Tensor& X, Tensor& Y) {
    Tile a = alloc_fragment({32, 32}, f32);
    copy(X.tile(0, 0), a);
    parallel({32, 32}, [&](Var i, Var j) { a(i, j) = a(i, j) * 2.0f; });
    copy(a, Y.tile(0, 0));
  });
  EXPECT_EQ(barriers(k), "copy(X>frag0) par copy(frag0>Y)");
}

// Tiles that share nothing are not ordered against each other.
TEST(InsertBarriers, DistinctTilesAreIndependent) {
  Kernel k = one_block([](Tensor& X, Tensor& Y) {
    Tile s = alloc_shared({32, 32}, f32), t = alloc_shared({32, 32}, f32);
    copy(X.tile(0, 0), s);
    copy(X.tile(32, 0), t);
    copy(s, Y.tile(0, 0));
    copy(t, Y.tile(32, 0));
  });
  EXPECT_EQ(barriers(k), "copy(X>shared0) copy(X>shared1) | copy(shared0>Y) copy(shared1>Y)");
}

// A serial loop that fills a shared tile and reads it: the barrier inside orders this
// iteration's read after its write, and the one at the end of the body orders the next
// iteration's write after this iteration's read.
TEST(InsertBarriers, LoopCarriedWriteAfterReadGetsABarrierAtTheEndOfTheBody) {
  Kernel k = one_block([](Tensor& X, Tensor& Y) {
    Tile s = alloc_shared({32, 32}, f32);
    Tile a = alloc_fragment({32, 32}, f32);
    clear(a);
    serial(ceildiv(Expr(M), 32), [&](Var i) {
      copy(X.tile(i * 32, 0), s);
      Tile b = alloc_fragment({32, 32}, f32);
      copy(s, b);
      parallel({32, 32}, [&](Var r, Var c) { a(r, c) = a(r, c) + b(r, c); });
    });
    copy(a, Y.tile(0, 0));
  });
  EXPECT_EQ(barriers(k),
            "fill(frag1) for{copy(X>shared0) | copy(shared0>frag2) par |} copy(frag1>Y)");
}

// A loop whose body only reads a tile written before it: the barrier goes before the loop, and
// the iterations need none between them (reads after reads).
TEST(InsertBarriers, ReadOnlyLoopIsSeparatedOnceBeforeIt) {
  Kernel k = one_block([](Tensor& X, Tensor& Y) {
    Tile s = alloc_shared({32, 32}, f32);
    copy(X.tile(0, 0), s);
    serial(4, [&](Var i) { copy(s, Y.tile(i * 32, 0)); });
  });
  EXPECT_EQ(barriers(k), "copy(X>shared0) | for{copy(shared0>Y)}");
}

// The end-of-body barrier is there only when the next iteration's accesses before its first
// barrier conflict with this iteration's after its last one. A tile read and then refilled
// needs it (the refill, then the next iteration's read). A chain s -> t -> Y does not: the
// next iteration's write of s comes after nothing but reads of t since the last barrier, and
// its own first barrier orders them before t is written again.
TEST(InsertBarriers, EndOfBodyBarrierOnlyWhereTheNextIterationConflicts) {
  Kernel refill = one_block([](Tensor& X, Tensor& Y) {
    Tile s = alloc_shared({32, 32}, f32);
    copy(X.tile(0, 0), s);
    serial(4, [&](Var i) {
      copy(s, Y.tile(i * 32, 0));
      copy(X.tile(i * 32, 0), s);
    });
  });
  EXPECT_EQ(barriers(refill), "copy(X>shared0) | for{copy(shared0>Y) | copy(X>shared0) |}");

  Kernel chain = one_block([](Tensor& X, Tensor& Y) {
    Tile s = alloc_shared({32, 32}, f32), t = alloc_shared({32, 32}, f32);
    serial(4, [&](Var i) {
      copy(X.tile(i * 32, 0), s);
      copy(s, t);
      copy(t, Y.tile(i * 32, 0));
    });
  });
  EXPECT_EQ(barriers(chain), "for{copy(X>shared0) | copy(shared0>shared1) | copy(shared1>Y)}");
}

// A shared tile written element by element in a parallel loop and read in the next one: the
// element-wise loops themselves get no barrier inside, the two are separated.
TEST(InsertBarriers, ParallelBodiesGetNoBarrierInside) {
  Kernel k = one_block([](Tensor& X, Tensor& Y) {
    Tile s = alloc_shared({32, 32}, f32);
    Tile a = alloc_fragment({32, 32}, f32);
    copy(X.tile(0, 0), a);
    parallel({32, 32}, [&](Var i, Var j) { s(j, i) = a(i, j); });
    parallel({32, 32}, [&](Var i, Var j) { a(i, j) = s(i, j) + 1.0f; });
    copy(a, Y.tile(0, 0));
  });
  EXPECT_EQ(barriers(k), "copy(X>frag1) par | par copy(frag1>Y)");
}

// A conditional that reads a shared tile is separated from the write before it as a whole, and
// its branch is scanned on its own.
TEST(InsertBarriers, ConditionalReadIsSeparatedBeforeTheIf) {
  Kernel k = one_block([](Tensor& X, Tensor& Y) {
    Tile s = alloc_shared({32, 32}, f32);
    copy(X.tile(0, 0), s);
    if_then(Expr(M) > 32, [&] { copy(s, Y.tile(0, 0)); });
  });
  EXPECT_EQ(barriers(k), "copy(X>shared0) | if{copy(shared0>Y)}");
}

/// A 64 x 64 gemm tile over a K loop, pipelined (3 stages) or serial.
Kernel small_gemm(bool pipelined_loop) {
  Dim K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  return kernel("mm", {A, B, C}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                [&](Var bx, Var by) {
                  Tile As = alloc_shared({64, 32}, bf16), Bs = alloc_shared({32, 64}, bf16);
                  Tile acc = alloc_fragment({64, 64}, f32);
                  clear(acc);
                  auto body = [&](Var kk) {
                    copy(A.tile(by * 64, kk * 32), As);
                    copy(B.tile(kk * 32, bx * 64), Bs);
                    gemm(As, Bs, acc);
                  };
                  if (pipelined_loop)
                    pipelined(ceildiv(K, 32), 3, body);
                  else
                    serial(ceildiv(K, 32), body);
                  copy(acc, C.tile(by * 64, bx * 64));
                });
}

// A cp.async pipeline orders its staged tiles by its own wait and barrier each iteration
// (LowerCpAsync), so InsertBarriers adds none for them; on sm_90a the same loop is a TMA
// warp-specialized pipeline whose tiles mbarriers order, so again none.
TEST(InsertBarriers, PipelinedTilesAreLeftToThePipeline) {
  Kernel k = small_gemm(true);
  EXPECT_EQ(barriers(k, "sm_80"),
            "fill(frag2) for{copy(A>shared0) copy(B>shared1) gemm} copy(frag2>C)");
  EXPECT_EQ(barriers(k, "sm_90a"),
            "fill(frag2) for{copy(A>shared0) copy(B>shared1) gemm} copy(frag2>C)");
}

// The same loop written serially has no pipeline to order its tiles: each iteration's gemm is
// separated from the copies before it, and the next iteration's copies from this gemm.
TEST(InsertBarriers, SerialGemmLoopIsFullyOrdered) {
  EXPECT_EQ(barriers(small_gemm(false), "sm_80"),
            "fill(frag2) for{copy(A>shared0) copy(B>shared1) | gemm |} copy(frag2>C)");
}

} // namespace
