// How a strided parameter is indexed (passes::Target::view_params): in the variant for
// contiguous arguments it is indexed as a contiguous tensor and its stride parameters are never
// read, so such launches run the code a contiguous declaration gives; in a variant where it is a
// view, its strides are read, and only its own. Checked on the variables the lowered body reads.
#include <gtest/gtest.h>

#include <set>
#include <tilepilot/tilepilot.h>

#include "LoweredBody.h"
#include "ir/IRVisitor.h"

using namespace tp;

namespace {

/// Every variable the lowered body of `kernel` reads, lowered for sm_90a with `views`.
std::set<uint64_t> read_variables(const Kernel& kernel, uint64_t views) {
  passes::Target t = passes::Target::parse("sm_90a");
  t.view_params = views;
  struct Reads : ir::IRVisitor {
    std::set<uint64_t> uids;
    using ir::IRVisitor::visit;
    void visit(const ir::Variable* v) override { uids.insert(v->uid); }
  } reads;
  reads.visit(tp::testing::lowered_body(kernel, t));
  return reads.uids;
}

/// How many of `param`'s stride variables are among `reads`.
int strides_read(const ir::Buffer& param, const std::set<uint64_t>& reads) {
  int n = 0;
  for (const Expr& st : param->strides)
    n += static_cast<int>(reads.count(ir::as<ir::Variable>(st)->uid));
  return n;
}

/// y = x + 1 over [16, 128] tiles, both tensors strided.
Kernel add_one() {
  Dim M("M"), N("N");
  Tensor X("X", {M, N}, bf16, strided), Y("Y", {M, N}, bf16, strided);
  return kernel("add_one_strided", {X, Y}, grid(ceildiv(N, 128), ceildiv(M, 16)), threads(128),
                [&](Var bx, Var by) {
                  Tile x = alloc_fragment({16, 128}, f32);
                  copy(X.tile(by * 16, bx * 128), x);
                  parallel({16, 128}, [&](Var i, Var j) { x(i, j) = x(i, j) + 1.0; });
                  copy(x, Y.tile(by * 16, bx * 128));
                });
}

} // namespace

TEST(StridedLowering, ContiguousArgumentsNeverReadTheStrides) {
  Kernel k = add_one();
  std::set<uint64_t> reads = read_variables(k, 0);
  EXPECT_EQ(strides_read(k.node().params[0], reads), 0);
  EXPECT_EQ(strides_read(k.node().params[1], reads), 0);
}

TEST(StridedLowering, AViewReadsItsOwnStridesOnly) {
  Kernel k = add_one();
  std::set<uint64_t> x_view = read_variables(k, 0b01), y_view = read_variables(k, 0b10);
  EXPECT_EQ(strides_read(k.node().params[0], x_view), 2);
  EXPECT_EQ(strides_read(k.node().params[1], x_view), 0);
  EXPECT_EQ(strides_read(k.node().params[0], y_view), 0);
  EXPECT_EQ(strides_read(k.node().params[1], y_view), 2);
}

TEST(StridedLowering, EachSetOfViewsIsItsOwnVariant) {
  passes::Target a = passes::Target::parse("sm_90a"), b = a;
  b.view_params = 0b10;
  EXPECT_NE(a.str(), b.str()) << "the cache key (canonical IR + target) tells them apart";
}
