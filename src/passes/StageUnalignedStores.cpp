// Staging an element-wise fragment's store through a shared tile where the destination's rows
// may not be 16-byte aligned (see StageUnalignedStores.h).
#include "passes/StageUnalignedStores.h"

#include <set>
#include <sstream>

#include "ir/IRVisitor.h"
#include "ir/KnownDivisor.h"
#include "passes/BufferAccesses.h"
#include "passes/ChunkAlignment.h"

namespace tp::passes {

namespace {

using ir::Scope;

/// Shared memory the kernel asks for as written: its shared tiles and the fragments that
/// layout inference placed in shared memory.
int64_t declared_shared_bytes(const ir::Stmt& body, const LayoutInfo& layouts) {
  int64_t n = 0;
  ir::for_each_stmt(body, [&](const ir::Stmt& s) {
    const auto* a = ir::as<ir::Allocate>(s);
    if (!a) return;
    const ir::Buffer& b = a->buffer;
    if (b->scope == Scope::shared ||
        (b->scope == Scope::fragment && layouts.promoted.count(b->uid)))
      n += b->const_elements() * dtype_bytes(b->dtype);
  });
  return n;
}

class Stage : public ir::IRMutator {
public:
  Stage(const ir::KernelNode& k, const LayoutInfo& layouts) : layouts_(layouts) {
    ir::for_each_stmt(k.body, [&](const ir::Stmt& s) { gemm_ |= ir::as<ir::Gemm>(s) != nullptr; });
    shared_bytes_ = declared_shared_bytes(k.body, layouts);
    threads_ = k.threads;
    auto it = k.attrs.find("staged_stores");
    // Values checked by annotate(): "0" or "1".
    off_ = it == k.attrs.end() ? !kStagedStoresByDefault : it->second == "0";
    off_reason_ = it == k.attrs.end()
                      ? "direct by default (annotate(\"staged_stores\", \"1\") asks for staging)"
                      : "the kernel asks for direct stores (staged_stores = 0)";
    reads_ = buffer_accesses(k.body).reads;
  }
  std::vector<StoreStaging> stores;

protected:
  using IRMutator::visit;

  ir::Stmt visit(const ir::For* op, const ir::Stmt& self) override {
    const bool pipelined = op->for_kind == ir::ForKind::pipelined;
    pipelined_depth_ += pipelined;
    ir::Stmt s = IRMutator::visit(op, self);
    pipelined_depth_ -= pipelined;
    return s;
  }

  ir::Stmt visit(const ir::Copy* c, const ir::Stmt& self) override {
    const ir::Buffer &f = c->src.buffer, &g = c->dst.buffer;
    if (f->scope != Scope::fragment || g->scope != Scope::global || !layouts_.in_registers(f) ||
        layouts_.fragment(f).kind != FragmentLayout::Kind::blocked)
      return self;
    StoreStaging report;
    report.loc = c->loc;
    report.fragment = f->name;
    report.tensor = g->name;
    ir::Stmt out = rewrite(c, report);
    stores.push_back(report);
    return out.defined() ? out : self;
  }

private:
  const LayoutInfo& layouts_;
  bool gemm_ = false;
  int pipelined_depth_ = 0;
  int64_t shared_bytes_ = 0; // the kernel's, with the tiles staged so far
  std::set<uint64_t> reads_; // buffers the kernel reads
  int64_t threads_ = 1;
  bool off_ = false;       // annotate("staged_stores", "0"), or no annotation while off by default
  std::string off_reason_; // why, in words

  /// Why the copy is not staged; empty when it may be.
  std::string blocker(const ir::Copy* c) const {
    const ir::Buffer &f = c->src.buffer, &g = c->dst.buffer;
    if (off_) return off_reason_;
    if (dtype_bytes(g->dtype) != 2) return "the destination's elements are not 16-bit";
    if (!ir::is_whole(c->src) || f->rank() != 2)
      return "it stores part of a fragment, or a 1-d one";
    const std::vector<int64_t> shape = f->const_shape();
    const std::vector<int64_t>& e = c->dst.extent;
    bool box = e.size() >= 2 && e[e.size() - 2] == shape[0] && e.back() == shape[1];
    for (size_t d = 0; box && d + 2 < e.size(); ++d)
      box = e[d] == 1;
    if (!box) return "its destination box is not the fragment's [m, n]";
    if (shape[1] % 8 != 0 || shape[1] < 64)
      return "its rows are not whole chunks of at least 64 elements";
    // Both versions' code lives in the kernel, and its registers are the larger of the two:
    // at 64 elements a thread (64 x 128 over 128 threads) the direct version went from 163 to
    // 176 registers (ptxas, sm_90a), one block an SM fewer; at 32 it took 0 to 4 more.
    if (shape[0] * shape[1] > kMaxStagedElementsPerThread * threads_)
      return "it holds more than " + std::to_string(kMaxStagedElementsPerThread) +
             " elements a thread";
    if (pipelined_depth_ > 0) return "it is inside a pipelined loop";
    if (gemm_) return "the kernel has a gemm";
    // The direct store leaves each element with the thread that computed it; the block store
    // moves it to another. A kernel that reads its output back would then need a barrier over
    // global memory, which no pass places.
    if (reads_.count(g->uid)) return "the kernel also reads '" + g->name + "'";
    if (shared_bytes_ + shape[0] * shape[1] * 2 > kMaxStagedBytes)
      return "a shared tile for it would take the kernel past " +
             std::to_string(kMaxStagedBytes / 1024) + " KiB of shared memory";
    return "";
  }

  ir::Stmt rewrite(const ir::Copy* c, StoreStaging& report) {
    report.reason = blocker(c);
    if (!report.reason.empty()) return {};
    const ir::Buffer &f = c->src.buffer, &g = c->dst.buffer;
    // The tile's column offset is often a block index times the tile's width: provably on
    // the 16-byte grid, though not a constant.
    const Expr col = c->dst.min.back();
    Expr aligned = ir::known_multiple_of(col, 16 / dtype_bytes(g->dtype))
                       ? chunks_aligned(g, Expr(0), Expr(0))
                       : chunks_aligned(g, col, col);
    if (known(aligned) == true) {
      report.reason = "the destination's rows and the tile's offset are 16-byte aligned";
      return {};
    }
    ir::Buffer t =
        ir::make_buffer(f->name + "_out", Scope::shared, g->dtype, f->shape, f->kernel_uid, c->loc);
    shared_bytes_ += t->const_elements() * dtype_bytes(t->dtype);
    report.staged = true;
    ir::Stmt staged = ir::Seq::make({ir::Copy::make(c->src, ir::whole(t), c->loc),
                                     ir::Copy::make(ir::whole(t), c->dst, c->loc)},
                                    c->loc);
    if (known(aligned) != false) {
      report.versioned = true;
      staged =
          ir::IfThenElse::make(aligned, ir::Copy::make(c->src, c->dst, c->loc), staged, c->loc);
    }
    return ir::Seq::make({ir::Allocate::make(t, c->loc), staged}, c->loc);
  }
};

} // namespace

StagedStores stage_unaligned_stores(const ir::KernelNode& k, const Target& t) {
  bool candidate = false;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    const auto* c = ir::as<ir::Copy>(s);
    candidate |= c && c->src.buffer->scope == Scope::fragment &&
                 c->dst.buffer->scope == Scope::global && dtype_bytes(c->dst.buffer->dtype) == 2;
  });
  if (!candidate) return {k.body, {}};
  const LayoutInfo layouts = infer_layouts(k, t);
  Stage p(k, layouts);
  StagedStores out;
  out.body = p.mutate(k.body);
  out.stores = std::move(p.stores);
  return out;
}

std::string to_string(const StoreStaging& s) {
  std::ostringstream os;
  os << "store of '" << s.fragment << "' to '" << s.tensor << "'";
  if (!s.staged) return os.str() + " direct: " + s.reason;
  os << " staged through a shared tile, in the destination's aligned 16-byte blocks";
  if (s.versioned) os << ", when its rows are not 16-byte aligned at run time (else direct)";
  return os.str();
}

} // namespace tp::passes
