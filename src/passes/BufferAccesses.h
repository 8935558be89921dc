// Which buffers a statement reads and which it writes, by uid: loads and stores, atomics,
// copies, gemm operands (the accumulator is read and written), fills, reductions and prints.
// Barrier insertion and pipeline planning classify accesses the same way through this.
#pragma once
#include <cstdint>
#include <map>
#include <set>

#include "ir/IR.h"

namespace tp::passes {

struct BufferAccesses {
  std::set<uint64_t> reads, writes;
  std::map<uint64_t, ir::Buffer> buffers; // every buffer above, by uid
  bool touches(uint64_t uid) const { return reads.count(uid) || writes.count(uid); }
};

BufferAccesses buffer_accesses(const ir::Stmt& s);

} // namespace tp::passes
