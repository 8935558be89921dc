// A kernel lowered for one CUDA target: the generated source, what launching it needs (block
// size, dynamic shared memory, tensor maps to encode) and the intermediate products that
// `tilepilot show` prints.
#pragma once
#include <string>
#include <vector>

#include "ir/IR.h"
#include "passes/Target.h"
#include "tilepilot/lang.h"

namespace tp::cuda {

/// A tensor map the launcher encodes (cuTensorMapEncodeTiled) for a TMA-loaded parameter, or
/// a TMA-stored one (`store`: its launch allows it by Target::tma_store_params instead).
struct TmaParam {
  int param = -1;           // kernel parameter index
  std::vector<int64_t> box; // innermost first
  int swizzle_bytes = 0;    // 0, 32, 64, 128
  bool store = false;
};

struct LoweredKernel {
  Kernel kernel; // the tile-level kernel (params, Dims, grid)
  passes::Target target;
  std::string entry;        // extern "C" symbol
  std::string source;       // CUDA C++
  std::string canonical_ir; // cache key part: canonical tile-level IR + target
  int block_threads = 0;    // consumers + producer warpgroup
  int64_t smem_bytes = 0;   // dynamic shared memory
  /// Thread-block cluster along grid y (2: blocks pair up; the launch rounds grid y up to even).
  int cluster_y = 1;
  /// Persistent: the launch passes a two-int scheduler workspace after the Dims (zero between
  /// launches; the kernel's last block resets it) and runs about one block per SM.
  bool persistent = false;
  std::vector<TmaParam> tmas;
  std::vector<bool> param_written; // per parameter: does the kernel write it
  /// Bit i: parameter i takes paired fragment stores, which a launch whose rows of it are even
  /// runs without alignment tests (passes::Target::even_rows).
  uint64_t paired_params = 0;
  /// Bit i: parameter i is TMA-stored on a launch whose argument allows it
  /// (passes::Target::tma_store_params).
  uint64_t tma_store_candidates = 0;
  std::string lowered_text; // layouts, pipeline plan and lowered IR
  /// The tile-level kernel with barriers inserted (what was lowered).
  ir::Stmt body_with_barriers;
};

} // namespace tp::cuda
