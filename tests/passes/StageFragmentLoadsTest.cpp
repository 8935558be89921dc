// StageFragmentLoads on tiny kernels: which pipelined loops it stages through shared memory
// (global->fragment copies become a copy into a shared tile, which the cp.async plan issues
// ahead, and a copy from it), which it leaves as they are and why, which requests are user
// errors, when it versions the loop on alignment, that the cp.async plan then takes the staged
// loop, and that the rewritten kernel, interpreted, computes bit for bit what the original does.
#include <gtest/gtest.h>

#include "BodyCensus.h"
#include "UserErrorText.h"
#include "ir/IRVisitor.h"
#include "passes/FlattenLets.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"
#include "passes/StageFragmentLoads.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using tp::testing::count_ifs;
using tp::testing::shared_tiles;

namespace {

struct GemvOptions {
  int stages = 2;
  int64_t K = 0;            // a constant K (0: a Dim)
  bool let_offset = false;  // the A tile's column comes from a let of the loop's body
  bool writes_x = false;    // the kernel also writes x (so x may not be read ahead)
  bool part_of_a = false;   // A's tile goes into the top half of a taller fragment
  bool shared_a = false;    // A's tile goes to shared memory
  bool second_loop = false; // another pipelined loop follows
  Schedule::Copies copies = Schedule::Copies::cp_async; // what asks for the staging
};

// Tiles are named by allocation order: frag0 = a (A's tile), frag1 = x, shared2 = as.
/// y = A x with the loop over K pipelined: A's [16, 64] tile and x's [64] slice go into f32
/// fragments (the A tile converts from bf16 in the copy).
Kernel gemv(const GemvOptions& o) {
  Dim M("M"), Kd("K");
  Expr K = o.K ? Expr(o.K) : Expr(Kd);
  Tensor A = o.K ? Tensor("A", {M, o.K}, bf16) : Tensor("A", {M, Kd}, bf16);
  Tensor X = o.K ? Tensor("x", {o.K}, bf16) : Tensor("x", {Kd}, bf16);
  Tensor Y("y", {M}, f32);
  return kernel("gemv", {A, X, Y}, grid(ceildiv(M, 16)), threads(128), [&](Var by) {
    Tile a = alloc_fragment({o.part_of_a ? 32 : 16, 64}, f32), x = alloc_fragment({64}, f32);
    Tile as = alloc_shared({16, 64}, f32);
    Tile part = alloc_fragment({16, 64}, f32), y = alloc_fragment({16}, f32);
    clear(part);
    auto body = [&](Var k) {
      Expr col = o.let_offset ? Expr(let("col", k * 64)) : Expr(k * 64);
      if (o.shared_a)
        copy(A.tile(by * 16, col), as);
      else if (o.part_of_a)
        copy(A.tile(by * 16, col), a.region({0, 0}, {16, 64}));
      else
        copy(A.tile(by * 16, col), a);
      copy(X.tile(k * 64), x);
      parallel({16, 64}, [&](Var i, Var j) {
        part(i, j) = part(i, j) + (o.shared_a ? as(i, j) : a(i, j)) * x(j);
      });
    };
    pipelined(ceildiv(K, 64), Schedule{.stages = o.stages, .copies = o.copies}, body);
    if (o.second_loop)
      pipelined(ceildiv(K, 64), Schedule{.stages = o.stages, .copies = o.copies}, body);
    reduce_sum(part, y, 1);
    copy(y, Y.tile(by * 16));
    if (o.writes_x) copy(y, X.tile(by * 16));
  });
}

passes::StagedBody stage(const Kernel& k) {
  ir::KernelNode n = k.node();
  n.body = passes::flatten_lets(n.body);
  return passes::stage_fragment_loads(n);
}

int loops_of(const ir::Stmt& body, ir::ForKind kind) {
  int n = 0;
  ir::for_each_stmt(body, [&](const ir::Stmt& s) {
    if (const auto* f = ir::as<ir::For>(s)) n += f->for_kind == kind;
  });
  return n;
}

// With K a Dim, the rows' alignment is known only at run time: the loop is versioned, the
// staged version pipelined over shared tiles of the sources' dtype, the other serial.
TEST(StageFragmentLoads, SymbolicRowsGiveTwoVersions) {
  passes::StagedBody p = stage(gemv({}));
  ASSERT_EQ(p.loops.size(), 1u);
  const passes::FragmentStaging& f = p.loops[0];
  EXPECT_EQ(f.reason, "");
  EXPECT_EQ(f.fragments, (std::vector<std::string>{"frag0", "frag1"}));
  EXPECT_EQ(f.tensors, (std::vector<std::string>{"A", "x"}));
  EXPECT_TRUE(f.versioned);
  std::map<std::string, DType> t = shared_tiles(p.body);
  EXPECT_EQ(t["frag0_staged"], DType::bf16);
  EXPECT_EQ(t["frag1_staged"], DType::bf16);
  EXPECT_EQ(loops_of(p.body, ir::ForKind::pipelined), 1);
  EXPECT_EQ(loops_of(p.body, ir::ForKind::serial), 1);
  EXPECT_EQ(count_ifs(p.body), 1);
  EXPECT_EQ(passes::to_string(f),
            "fragment loads into 'frag0', 'frag1' staged through shared memory for a 2-stage "
            "pipeline, when the chunks of 'A', 'x' are 16-byte aligned at run time (else the loop "
            "runs serially, as written)");
}

// Constant rows decide at compile time: aligned ones are staged with no second version;
// unaligned ones (K = 500: 1000-byte rows) can never be, so asking for cp.async is an error.
TEST(StageFragmentLoads, ConstantRowsPickTheVersion) {
  passes::StagedBody p = stage(gemv({.K = 512}));
  EXPECT_FALSE(p.loops[0].versioned);
  EXPECT_EQ(count_ifs(p.body), 0);
  EXPECT_EQ(loops_of(p.body, ir::ForKind::pipelined), 1);
  std::string e = test::user_error_text([] { stage(gemv({.K = 500})); });
  EXPECT_NE(e.find("StageFragmentLoadsTest.cpp:"), std::string::npos) << e; // the loop's line
  EXPECT_NE(e.find("pipelined: copies = cp_async cannot be honoured: the copy from 'A' into "
                   "'frag0' can never move whole 16-byte chunks (its rows or its tile are not "
                   "16-byte aligned); drop copies = cp_async to run the loop serially"),
            std::string::npos)
      << e;
}

// A loop that asks for cp.async and has nothing to stage is an error that names why.
TEST(StageFragmentLoads, NothingToStageIsAUserError) {
  std::string e = test::user_error_text([] { stage(gemv({.writes_x = true, .part_of_a = true})); });
  EXPECT_NE(e.find("copies = cp_async cannot be honoured: the copy from 'A' into 'frag0' writes "
                   "only part of its fragment"),
            std::string::npos)
      << e;
}

// Loops the pass leaves alone, each with the reason `show` prints.
TEST(StageFragmentLoads, LoopsItLeavesSayWhy) {
  auto reason = [](const GemvOptions& o) {
    passes::StagedBody p = stage(gemv(o));
    EXPECT_FALSE(p.loops.empty());
    return p.loops.empty() ? std::string("no report") : p.loops[0].reason;
  };
  EXPECT_EQ(reason({.copies = Schedule::Copies::automatic}),
            "the loop does not ask for copies = cp_async (fragment loads are staged only on "
            "request)");
  EXPECT_EQ(reason({.shared_a = true}),
            "the copy from 'A' into 'shared2' goes to shared memory: the shared-memory plans "
            "take this loop as it is");
  EXPECT_EQ(reason({.second_loop = true}), "the kernel has more than one pipelined loop");
  // A fragment written only in part keeps its copy; x alone is staged.
  EXPECT_EQ(stage(gemv({.part_of_a = true})).loops[0].fragments, std::vector<std::string>{"frag1"});
  // x written by the kernel: A alone is staged.
  EXPECT_EQ(stage(gemv({.writes_x = true})).loops[0].fragments, std::vector<std::string>{"frag0"});
}

// A serial loop is not the pass's to change: no report, the same body.
TEST(StageFragmentLoads, SerialLoopIsUnchanged) {
  Dim N("N");
  Tensor X("x", {N}, f32), Y("y", {1}, f32);
  Kernel k = kernel("sum", {X, Y}, grid(1), threads(64), [&](Var) {
    Tile x = alloc_fragment({64}, f32), s = alloc_fragment({64}, f32);
    Tile t = alloc_fragment({1}, f32);
    clear(s);
    serial(ceildiv(N, 64), [&](Var i) {
      copy(X.tile(i * 64), x);
      parallel({64}, [&](Var j) { s(j) = s(j) + x(j); });
    });
    reduce_sum(s, t, 0);
    copy(t, Y.tile(0));
  });
  passes::StagedBody p = passes::stage_fragment_loads(k.node());
  EXPECT_TRUE(p.loops.empty());
  EXPECT_TRUE(p.body.same_as(k.node().body));
}

// The staged loop is what the cp.async plan takes, on sm_80 and on sm_90a (where it sits in a
// branch, so the TMA plan does not), with one staged tile per fragment.
TEST(StageFragmentLoads, CpAsyncPlanTakesTheStagedLoop) {
  for (const char* arch : {"sm_80", "sm_90a"})
    for (int stages : {2, 3}) {
      passes::Target t = passes::Target::parse(arch);
      ir::KernelNode n = gemv({.stages = stages}).node();
      n.body = stage(gemv({.stages = stages})).body;
      passes::PipelinePlan plan = passes::plan_pipeline(n, passes::infer_layouts(n, t), t);
      EXPECT_TRUE(plan.cp_async) << arch << ": " << plan.cp_async_reason;
      EXPECT_EQ(plan.stages, stages);
      EXPECT_EQ(plan.staged.size(), 2u);
      EXPECT_EQ(plan.prefetched.size(), 2u);
    }
}

// An offset from a let of the loop's body (flattened, as the CUDA backend runs the pass) is
// seen through in the alignment condition.
TEST(StageFragmentLoads, LetOffsetsAreSeenThroughInTheCondition) {
  passes::StagedBody p = stage(gemv({.let_offset = true}));
  ASSERT_EQ(p.loops.size(), 1u);
  EXPECT_EQ(p.loops[0].fragments, (std::vector<std::string>{"frag0", "frag1"}));
  // K = 512 makes every term constant, so the let must have been substituted for it to fold.
  EXPECT_FALSE(stage(gemv({.K = 512, .let_offset = true})).loops[0].versioned);
}

/// The kernel with its body rewritten by the pass (no lets: the interpreter takes them
/// unflattened).
Kernel rewritten(const Kernel& k) {
  auto node = std::make_shared<ir::KernelNode>(k.node());
  node->body = stage(k).body;
  return Kernel(node);
}

// The rewritten kernel computes what the original does, bit for bit: K = 333 runs the serial
// version (its rows are not 16-byte aligned), K = 40 (one iteration, shorter than the pipeline)
// and K = 128 the staged one.
TEST(StageFragmentLoads, RewrittenKernelComputesTheSame) {
  for (GemvOptions o : {GemvOptions{}, GemvOptions{.stages = 3}})
    for (int64_t K : {333, 40, 128}) {
      const int64_t M = 37;
      Kernel k = gemv(o), r = rewritten(k);
      ASSERT_EQ(count_ifs(r.node().body), 1);
      HostTensor a(bf16, {M, K}), x(bf16, {K}), y0(f32, {M}), y1(f32, {M});
      a.fill_random(1), x.fill_random(2), y0.poison(), y1.poison();
      interpret(k, {a, x, y0});
      interpret(r, {a, x, y1});
      int64_t differ = 0;
      for (int64_t i = 0; i < M; ++i)
        differ += !(y0.get(i) == y1.get(i));
      EXPECT_EQ(differ, 0) << "stages " << o.stages << " K " << K;
    }
}

} // namespace
