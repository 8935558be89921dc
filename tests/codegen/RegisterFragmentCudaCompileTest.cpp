// Register fragments through NVRTC, no GPU needed: the differential cases for blocked
// fragments (DifferentialCases.h) compile for sm_90a and sm_80 without spills, their global
// copies become vector loads and stores in the PTX, their reductions warp shuffles, and an
// element-wise kernel uses no shared memory at all.
#include <gtest/gtest.h>

#include "DifferentialCases.h"
#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ir/IRVisitor.h"
#include "passes/InferLayouts.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"

using namespace tp;
using namespace tp::difftest;

namespace {

struct Compiled {
  cuda::LoweredKernel lk;
  rt::JitKernel j;
  rt::ResourceUsage u;
};

Compiled compile_for(const Kernel& k, const std::string& arch) {
  cuda::LoweredKernel lk = cuda::lower_kernel(k, passes::Target::parse(arch));
  rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, arch, {}, true);
  rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
  return {lk, j, u};
}

bool has(const std::string& ptx, const std::string& s) {
  return ptx.find(s) != std::string::npos;
}

class RegisterCase : public testing::TestWithParam<std::string> {};

TEST_P(RegisterCase, CompilesWithVectorAccessesAndNoSpills) {
  DiffCase c;
  bool found = false;
  for (const NamedCase& n : differential_cases())
    if (GetParam() == n.name) c = n.make(), found = true;
  ASSERT_TRUE(found) << GetParam();
  for (std::string arch : {"sm_90a", "sm_80"}) {
    Compiled r = compile_for(c.kernel, arch);
    ASSERT_FALSE(r.j.compiled.cubin.empty()) << arch << "\n" << r.j.compiled.log;
    EXPECT_EQ(r.u.spill_store_bytes, 0) << arch << " " << r.u.raw;
    EXPECT_EQ(r.u.spill_load_bytes, 0) << arch << " " << r.u.raw;
    const std::string& ptx = r.j.compiled.ptx;
    // 16-byte runs (4 x 32-bit words) read from and written to global memory.
    EXPECT_TRUE(has(ptx, "ld.global.v4") || has(ptx, "ld.global.nc.v4")) << arch;
    if (GetParam().rfind("Register", 0) == 0)
      EXPECT_TRUE(has(ptx, "shfl.sync.bfly")) << arch << ": the reduction does not shuffle";
    if (GetParam().rfind("Vector", 0) == 0) {
      EXPECT_TRUE(has(ptx, "st.global.v4")) << arch;
      // Shared memory may hold a store staged for unaligned rows (StageUnalignedStores.h),
      // never a fragment.
      EXPECT_TRUE(
          passes::infer_layouts(c.kernel.node(), passes::Target::parse(arch)).promoted.empty())
          << arch << ": element-wise fragments went to shared memory";
    }
  }
}

// The ragged-run cases exercise what they are named for: every fragment in registers (before
// ragged layouts, rows of 1000 and 5000 went to shared memory), with a ragged last run block.
TEST(CudaCompileRegisterFragments, RaggedRunCasesKeepEveryFragmentInRegisters) {
  for (DiffCase c : {register_ragged_columns_two_rows(), register_ragged_columns_one_row()}) {
    SCOPED_TRACE(c.name);
    const ir::KernelNode& k = c.kernel.node();
    passes::LayoutInfo l = passes::infer_layouts(k, passes::Target::parse("sm_90a"));
    bool ragged = false;
    ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
      const auto* a = ir::as<ir::Allocate>(s);
      if (!a || a->buffer->scope != ir::Scope::fragment) return;
      ASSERT_TRUE(l.in_registers(a->buffer)) << a->buffer->name;
      const passes::FragmentLayout& f = l.fragment(a->buffer);
      ragged = ragged ||
               (f.elementwise() && f.kind != passes::FragmentLayout::Kind::rows && f.ragged_cols());
    });
    EXPECT_TRUE(ragged) << "no fragment has a ragged last run block";
  }
}

// An element-wise kernel whose warps hold whole rows of runs, asking for row_lanes = 3, moves
// unaligned rows by its lanes together (tp/tile/row_lanes.cuh): the shuffles down (a load's
// second block) and up (a store's previous tail) are in the PTX, `show` names the plan, and
// nothing spills, on both targets.
TEST(CudaCompileRowLanes, UnalignedRowsShuffleBetweenLanes) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), C("C", {M, N}, bf16);
  Kernel k = kernel("lanes_affine", {A, C}, grid(ceildiv(N, 256), ceildiv(M, 16)), threads(128),
                    [&](Var bx, Var by) {
                      annotate("row_lanes", "3");
                      Tile a = alloc_fragment({16, 256}, bf16), c = alloc_fragment({16, 256}, bf16);
                      copy(A.tile(by * 16, bx * 256), a);
                      parallel({16, 256}, [&](Var i, Var j) { c(i, j) = a(i, j) * 2.0; });
                      copy(c, C.tile(by * 16, bx * 256));
                    });
  for (std::string arch : {"sm_90a", "sm_80"}) {
    Compiled r = compile_for(k, arch);
    ASSERT_FALSE(r.j.compiled.cubin.empty()) << arch << "\n" << r.j.compiled.log;
    EXPECT_EQ(r.u.spill_store_bytes, 0) << arch << " " << r.u.raw;
    EXPECT_EQ(r.u.spill_load_bytes, 0) << arch << " " << r.u.raw;
    const std::string& ptx = r.j.compiled.ptx;
    EXPECT_TRUE(has(ptx, "shfl.sync.down")) << arch;
    EXPECT_TRUE(has(ptx, "shfl.sync.up")) << arch;
    EXPECT_TRUE(has(ptx, "activemask")) << arch;
    EXPECT_TRUE(has(ptx, "st.global.v4")) << arch;
    EXPECT_NE(r.lk.lowered_text.find("runs of 32 lanes together"), std::string::npos) << arch;
  }
}

// Whole shared tiles stored to global rows of any alignment: aligned 16-byte global stores,
// gathered from shared memory with 16-byte loads, and no spills, on both targets.
TEST(CudaCompileBlockStores, SharedTilesStoreWholeGlobalBlocks) {
  DiffCase c = shared_tile_block_stores();
  for (std::string arch : {"sm_90a", "sm_80"}) {
    Compiled r = compile_for(c.kernel, arch);
    ASSERT_FALSE(r.j.compiled.cubin.empty()) << arch << "\n" << r.j.compiled.log;
    EXPECT_EQ(r.u.spill_store_bytes, 0) << arch << " " << r.u.raw;
    EXPECT_TRUE(has(r.j.compiled.ptx, "st.global.v4")) << arch;
    EXPECT_TRUE(has(r.j.compiled.ptx, "ld.shared.v4")) << arch;
    EXPECT_TRUE(has(r.j.compiled.ptx, "st.shared.v4")) << arch << ": the fragment's runs";
  }
}

// The transposes' shared tiles take a swizzle chosen for their column reads (the pass runs in
// lower_kernel), keep their 16-byte copies and block stores, and compile without spills.
TEST(CudaCompileSharedSwizzles, TransposedTilesAreSwizzledAndKeepTheirVectorAccesses) {
  DiffCase c = swizzled_shared_transposes();
  for (std::string arch : {"sm_90a", "sm_80"}) {
    Compiled r = compile_for(c.kernel, arch);
    ASSERT_FALSE(r.j.compiled.cubin.empty()) << arch << "\n" << r.j.compiled.log;
    EXPECT_EQ(r.u.spill_store_bytes, 0) << arch << " " << r.u.raw;
    EXPECT_EQ(r.u.spill_load_bytes, 0) << arch << " " << r.u.raw;
    // The two tiles read down their columns (s and f), each reported with the wavefronts the
    // swizzle saves; u is written and read along its rows and stays linear.
    size_t notes = 0;
    for (size_t at = 0;
         (at = r.lk.lowered_text.find("swizzled for its accesses", at)) != std::string::npos; ++at)
      ++notes;
    EXPECT_EQ(notes, 2u) << arch << "\n" << r.lk.lowered_text.substr(0, 800);
    EXPECT_TRUE(has(r.j.compiled.ptx, "st.global.v4")) << arch << ": the block store of u";
    EXPECT_TRUE(has(r.j.compiled.ptx, "ld.shared.v4")) << arch << ": the block store of u";
  }
}

// A 128 x 128 transpose over 256 threads, its shared tile swizzled or kept linear: the element
// fallback of its vector copy (odd rows) addresses each chunk from its first element, so the
// swizzle's XOR is not recomputed per element. Recomputed, nvcc kept an address register for
// each of a thread's 64 stores: 210 registers against 96 linear, and half the blocks an SM.
TEST(CudaCompileSharedSwizzles, SwizzledTileCostsNoMoreRegistersThanALinearOne) {
  auto transpose = [](bool linear) {
    Dim M("M"), N("N");
    Tensor A("A", {M, N}, bf16), B("B", {N, M}, bf16);
    return kernel("transpose", {A, B}, grid(ceildiv(N, 128), ceildiv(M, 128)), threads(256),
                  [&](Var bx, Var by) {
                    if (linear) annotate("shared_swizzle", "0");
                    Tile s = alloc_shared({128, 128}, bf16), t = alloc_fragment({128, 128}, bf16);
                    copy(A.tile(by * 128, bx * 128), s);
                    parallel({128, 128}, [&](Var i, Var j) { t(i, j) = s(j, i); });
                    copy(t, B.tile(bx * 128, by * 128));
                  });
  };
  Compiled sw = compile_for(transpose(false), "sm_90a"),
           lin = compile_for(transpose(true), "sm_90a");
  ASSERT_NE(sw.lk.lowered_text.find("swizzled for its accesses"), std::string::npos)
      << "the tile was not swizzled, so the test shows nothing";
  ASSERT_GT(lin.u.registers, 0) << lin.u.raw;
  EXPECT_LE(sw.u.registers, lin.u.registers + 8) << sw.u.raw << "\n" << lin.u.raw;
}

INSTANTIATE_TEST_SUITE_P(
    CudaCompileRegisterFragments, RegisterCase,
    testing::Values("RegisterRowReduceWithinAWarp", "RegisterRowReduceAcrossWarps",
                    "RegisterFragmentWithRaggedRowBlock", "RegisterFragmentWithRaggedColumnRuns",
                    "RegisterRowWithRaggedColumnRuns", "VectorCopyAtOddSizes", "VectorCopyAligned"),
    [](const testing::TestParamInfo<std::string>& i) { return i.param; });

} // namespace
