// Which buffers a statement reads and which it writes, by uid: loads and stores, atomics,
// copies, gemm operands (the accumulator is read and written), fills, reductions and prints.
// Barrier insertion and pipeline planning classify accesses the same way through this. Also
// which variables an expression reads (VarUses), for the plans that must know what a load's
// coordinates depend on.
#pragma once
#include <cstdint>
#include <map>
#include <set>

#include "ir/IR.h"
#include "ir/IRVisitor.h"

namespace tp::passes {

struct BufferAccesses {
  std::set<uint64_t> reads, writes;
  std::map<uint64_t, ir::Buffer> buffers; // every buffer above, by uid
  bool touches(uint64_t uid) const { return reads.count(uid) || writes.count(uid); }
};

BufferAccesses buffer_accesses(const ir::Stmt& s);

/// Collects the uids of the variables an expression reads.
class VarUses : public ir::IRVisitor {
public:
  using ir::IRVisitor::visit;
  std::set<uint64_t> uids;

protected:
  void visit(const ir::Variable* v) override { uids.insert(v->uid); }
};

} // namespace tp::passes
