// Differential cases: one small kernel per rule of the language's one semantics (src/ir/IR.h,
// docs/semantics.md), with its arguments and the expected result computed from the rule in plain
// C++ loops. Used by DifferentialTest.cpp: the CPU suite runs each case on the interpreter and
// compares with the rule's result; the GPU suite runs it on the interpreter and on CUDA and
// compares the two element by element. The cases live in DiffCasesMemory.h, DiffCasesRegisters.h
// and DiffCasesGemm.h; this file names them.
#pragma once
#include <vector>

#include "DiffCase.h"
#include "DiffCasesGemm.h"
#include "DiffCasesMemory.h"
#include "DiffCasesRegisters.h"

namespace tp::difftest {

struct NamedCase {
  const char* name;
  DiffCase (*make)();
};

inline std::vector<NamedCase> differential_cases() {
  return {{"RegionOfFragmentCopiesOnlyTheRegion", region_copy_from_fragment},
          {"FillOfFragmentRegionKeepsTheRest", region_fill_of_fragment},
          {"CopyIntoFragmentRegionKeepsTheRest", region_copy_into_fragment},
          {"TileAtomicAddDropsOutOfBounds", atomic_add_edge_tile},
          {"AccumulatorAtomicAddPairsAdjacentColumns", atomic_add_accumulator_pairs},
          {"AccumulatorStoresPairAdjacentColumns", store_accumulator_pairs},
          {"SelectEvaluatesOnlyTheChosenSide", select_is_lazy},
          {"ElementAccessAtRankSix", rank6_elements},
          {"SharedTileReadAcrossWarpRolesIsOrdered", shared_index_between_warp_roles},
          {"LocalTileIsTheSameInEveryThread", local_tile},
          {"CopyReadsZeroAndDropsWritesOutOfBounds", copy_out_of_bounds},
          {"IntegerCopyIsExactAtEdgeTiles", copy_integers_exactly},
          {"BitcastReinterpretsBits", bitcast_bits},
          {"FillWritesExactlyItsRegion", fill_region},
          {"ReduceSumAndMaxAlongRows", reduce_rows},
          {"GemmAtOddExtents", gemm_odd_extents},
          {"TwoBlocksPerSmChangeNoResult", two_blocks_per_sm},
          {"ThreeBlocksPerSmAtAlignedRows", three_blocks_per_sm_aligned},
          {"AccumulatorTmaStoredAtEdgeTiles", accumulator_tma_stored_at_edges},
          {"RegisterRowReduceWithinAWarp", register_reduce_in_one_warp},
          {"RegisterRowReduceAcrossWarps", register_reduce_across_warps},
          {"RegisterFragmentWithRaggedRowBlock", register_ragged_rows_and_columns},
          {"RegisterFragmentWithRaggedColumnRuns", register_ragged_columns_two_rows},
          {"RegisterRowWithRaggedColumnRuns", register_ragged_columns_one_row},
          {"VectorCopyAtOddSizes", vector_copy_odd},
          {"VectorCopyAligned", vector_copy_aligned},
          {"GemmWithRowsAcrossWarps", gemm_rows_across_warps},
          {"OneWarpMmaPipelinedKTail", one_warp_mma_pipelined_tail},
          {"OneWarpMmaSerialKTail", one_warp_mma_serial_tail},
          {"OneWarpMmaPipelined", one_warp_mma_pipelined},
          {"OneWarpMmaTransB", one_warp_mma_trans_b},
          {"OneWarpMmaRegisterA", one_warp_mma_register_a},
          {"CopyFlattensOuterDimensionsRowMajor", copy_flattens_outer_dimensions},
          {"BoxCopyIntoPipelinedGemm", box_copy_into_pipelined_gemm},
          {"SharedTileWrittenInColumnPairs", shared_column_pairs},
          {"SharedTileStoredInAlignedBlocks", shared_tile_block_stores},
          {"SharedTileWrittenAsPackedProducts", shared_packed_products},
          {"SharedTilesSwizzledForColumnReads", swizzled_shared_transposes},
          {"StagedTileReadAfterItsLoop", staged_tile_read_after_its_loop},
          {"GemmTileStartingSixteenBytesBack", gemm_tile_sixteen_bytes_back},
          {"GemmTileOffTheSixteenByteGrid", gemm_tile_off_the_sixteen_byte_grid},
          {"GemmLoopOfOneStage", gemm_loop_of_one_stage},
          {"StagedStoresInALoop", staged_stores_in_a_loop}};
}

} // namespace tp::difftest
