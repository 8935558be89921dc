// FlattenLets on tiny kernels: the builder records a let as a Let whose body is the rest of its
// scope; after the pass every let is a statement of its own followed by that rest, as siblings,
// in loop bodies, element-wise bodies and branches alike, with nothing reordered, dropped or
// evaluated twice. Flattening a flattened body changes nothing.
#include <gtest/gtest.h>

#include "ir/IRVisitor.h"
#include "passes/FlattenLets.h"
#include "tilepilot/lang.h"

using namespace tp;

namespace {

std::string shape(const ir::Stmt& s);

/// A statement list as tokens: "let x" (with "{...}" when it still has a body), "copy",
/// "for{...}", "par{...}", "if{...}", "store"; allocations are left out.
std::string shape(const std::vector<ir::Stmt>& stmts) {
  std::string out;
  for (const ir::Stmt& s : stmts) {
    std::string t = shape(s);
    if (t.empty()) continue;
    out += (out.empty() ? "" : " ") + t;
  }
  return out;
}

std::string shape(const ir::Stmt& s) {
  if (!s.defined()) return "";
  if (const auto* q = ir::as<ir::Seq>(s)) return shape(q->stmts);
  if (const auto* l = ir::as<ir::Let>(s)) {
    std::string name = "let " + ir::as<ir::Variable>(l->var)->name;
    return l->body.defined() ? name + "{" + shape(l->body) + "}" : name;
  }
  if (ir::as<ir::Copy>(s)) return "copy";
  if (ir::as<ir::Store>(s)) return "store";
  if (const auto* f = ir::as<ir::For>(s)) return "for{" + shape(f->body) + "}";
  if (const auto* p = ir::as<ir::Parallel>(s)) return "par{" + shape(p->body) + "}";
  if (const auto* i = ir::as<ir::IfThenElse>(s)) return "if{" + shape(i->then_case) + "}";
  return "";
}

Dim M("M"), N("N");

Kernel with_lets() {
  Tensor X("X", {M, N}, f32), Y("Y", {M, N}, f32);
  return kernel("k", {X, Y}, grid(ceildiv(M, 32)), threads(128), [&](Var b) {
    Tile a = alloc_fragment({32, 32}, f32);
    Var row = let("row", b * 32);
    Var row2 = let("row2", row + 0);
    serial(ceildiv(Expr(N), 32), [&](Var j) {
      Var col = let("col", j * 32);
      copy(X.tile(row2, col), a);
      parallel({32, 32}, [&](Var r, Var c) {
        Var v = let("v", a(r, c) * 2.0f);
        a(r, c) = v;
      });
      if_then(Expr(M) > 32, [&] {
        Var off = let("off", col + 0);
        copy(a, Y.tile(row, off));
      });
    });
  });
}

// The builder's nesting: each let holds the rest of its scope.
TEST(FlattenLets, BuilderNestsTheRestOfTheScopeInEachLet) {
  EXPECT_EQ(shape(with_lets().node().body),
            "let row{let row2{for{let col{copy par{let v{store}} if{let off{copy}}}}}}");
}

// After the pass every let is a sibling of what follows it, at every depth.
TEST(FlattenLets, EveryLetBecomesASiblingOfTheRestOfItsScope) {
  EXPECT_EQ(shape(passes::flatten_lets(with_lets().node().body)),
            "let row let row2 for{let col copy par{let v store} if{let off copy}}");
}

// The let keeps its variable and its value: the flattened let is the same binding.
TEST(FlattenLets, LetsKeepTheirVariableAndValue) {
  Kernel k = with_lets();
  const auto* before = ir::as<ir::Let>(ir::as<ir::Seq>(k.node().body)->stmts.back());
  ASSERT_NE(before, nullptr);
  ir::Stmt flat = passes::flatten_lets(k.node().body);
  const ir::Let* after = nullptr;
  ir::for_each_stmt(flat, [&](const ir::Stmt& s) {
    if (const auto* l = ir::as<ir::Let>(s); l && !after) after = l;
  });
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->var.get(), before->var.get());
  EXPECT_EQ(after->value.get(), before->value.get());
  EXPECT_FALSE(after->body.defined());
}

// Flattening is idempotent, and a body without lets is returned as it is.
TEST(FlattenLets, IsIdempotentAndLeavesLetFreeBodiesAlone) {
  ir::Stmt once = passes::flatten_lets(with_lets().node().body);
  EXPECT_EQ(shape(passes::flatten_lets(once)), shape(once));

  Tensor X("X", {M, N}, f32), Y("Y", {M, N}, f32);
  Kernel plain = kernel("p", {X, Y}, grid(1), threads(128), [&](Var) {
    Tile a = alloc_fragment({32, 32}, f32);
    copy(X.tile(0, 0), a);
    copy(a, Y.tile(0, 0));
  });
  EXPECT_EQ(shape(passes::flatten_lets(plain.node().body)), shape(plain.node().body));
  EXPECT_EQ(shape(plain.node().body), "copy copy");
}

} // namespace
