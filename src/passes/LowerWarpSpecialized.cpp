// The warp-specialized pipeline on sm_90a: a producer branch (one thread issues TMA loads into
// staged buffers guarded by full/empty mbarriers) and a consumer branch (the kernel body, its
// pipelined loop waiting for full stages and releasing them). Options: persistent blocks that
// take tiles from a launch-wide counter, and ping-pong turns of the consumer warpgroups.
#include <algorithm>
#include <set>

#include "ir/IRVisitor.h"
#include "passes/BufferAccesses.h"
#include "passes/InsertBarriers.h"
#include "passes/LowerTileOps.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

namespace {

/// Byte address of pipeline barrier `i` (full: 0..S-1, empty: S..2S-1, prologue: 2S).
Expr bar_addr(const LowerContext& cx, const Expr& i) {
  return call_expr("tp.smem_addr", {Expr(cx.smem.barrier_offset) + i * 8}, DType::i32);
}

/// The TMA instructions of one load into stage `stage` on barrier `bar`.
ir::Stmt issue_tma(const LowerContext& cx, const TmaLoad& l, int index, const Expr& stage,
                   const Expr& bar) {
  const ir::Copy* c = l.copy;
  const Buffer& dst = c->dst.buffer;
  const SmemPlan::Slot& slot = cx.smem.slot(dst);
  std::vector<int64_t> ds = dst->const_shape();
  int eb = dtype_bytes(dst->dtype);
  int64_t inner = l.box[0];
  std::vector<ir::Stmt> out;
  int rank = c->src.buffer->rank();
  // Multicast in a 2-CTA cluster: CTA r loads boxes r, r+2, ... into both CTAs (mask 0b11).
  const bool mc = l.multicast && cx.plan.cluster == 2;
  Expr cta_rank = call_expr("tp::sm90::cluster_ctarank", {}, DType::i32);
  // Split by rows (an odd number of boxes): CTA r loads rows [r*h, (r+1)*h) of every box.
  const int64_t half_rows = ds[0] / 2;
  for (int64_t j = 0; j < l.boxes; ++j) {
    Expr offset = Expr(slot.offset) + stage * slot.stage_bytes + Expr(j * ds[0] * inner * eb);
    if (mc && l.multicast_rows) offset = offset + cta_rank * Expr(half_rows * inner * eb);
    Expr addr = call_expr("tp.smem_addr", {offset}, DType::i32);
    std::vector<Expr> args = {addr, call_expr("tp.tmap", {Expr(index)}, DType::i32), bar};
    if (mc) args.push_back(Expr(3));
    args.push_back(lower_expr(cx, c->src.min[rank - 1]) + Expr(j * inner));
    for (int d = rank - 2; d >= 0; --d) {
      Expr coord = lower_expr(cx, c->src.min[d]);
      if (mc && l.multicast_rows && d == rank - 2) coord = coord + cta_rank * Expr(half_rows);
      args.push_back(coord);
    }
    std::string fn = "tp::sm90::tma_load_" + std::to_string(rank) + "d";
    if (!mc)
      out.push_back(call(fn, args));
    else if (l.multicast_rows)
      out.push_back(call(fn + "_multicast", args));
    else
      out.push_back(if_then(cta_rank == Expr(j % 2), call(fn + "_multicast", args)));
  }
  return seq(out);
}

/// Does `s` read or write buffer `uid` (as a tile region or element by element)?
bool mentions_buffer(const ir::Stmt& s, uint64_t uid) {
  struct Finder : ir::IRVisitor {
    uint64_t uid = 0;
    bool found = false;
    using ir::IRVisitor::visit;
    void visit(const ir::Region& r) override {
      found |= r.buffer && r.buffer->uid == uid;
      ir::IRVisitor::visit(r);
    }
    void visit(const ir::Load* l) override {
      found |= l->buffer->uid == uid;
      ir::IRVisitor::visit(l);
    }
    void visit(const ir::Store* st) override {
      found |= st->buffer->uid == uid;
      ir::IRVisitor::visit(st);
    }
  } f;
  f.uid = uid;
  f.visit(s);
  return f.found;
}

/// The clear of the main loop's accumulator that can be folded into the loop: a zero Fill of
/// `acc` among the body's statements before the loop, with nothing between it and the loop
/// touching `acc`. Undefined when there is none.
ir::Stmt foldable_clear(const ir::Seq* body, const ir::For* loop, const ir::Buffer& acc) {
  ir::Stmt fill;
  for (const ir::Stmt& s : body->stmts) {
    if (s.get() == static_cast<const ir::StmtNode*>(loop)) return fill;
    const auto* f = ir::as<ir::Fill>(s);
    const auto* zero = f ? ir::as<ir::FloatImm>(f->value) : nullptr;
    bool whole = f && f->dst.extent == f->dst.buffer->const_shape();
    for (size_t d = 0; whole && d < f->dst.min.size(); ++d) {
      const auto* m = ir::as<ir::IntImm>(f->dst.min[d]);
      whole = m && m->value == 0;
    }
    if (f && whole && f->dst.buffer->uid == acc->uid && zero && zero->value == 0.0)
      fill = s;
    else if (mentions_buffer(s, acc->uid))
      fill = ir::Stmt();
  }
  return ir::Stmt();
}

/// Does any consumer write a shared buffer (one the producer does not fill)? A persistent
/// kernel then needs a consumer barrier between tiles: the next tile's writes must not overtake
/// another thread's reads of this tile's values.
bool consumers_write_shared(const LowerContext& cx) {
  for (const auto& [uid, slot] : cx.smem.slots) {
    bool fed = false;
    for (const TmaLoad& l : cx.plan.loads)
      fed |= l.copy->dst.buffer->uid == uid;
    if (!fed) return true;
  }
  return false;
}

/// The deferred second gemm with its A operand from registers: A packed in pairs where it is cast
/// (end of iteration k-1), not where iteration k's wgmma reads it. Packed there, the loop carries
/// 16-bit halves and repacks them at the wgmma; ptxas then fences each k16 step separately, and
/// waiting for the first gemm becomes waiting for all of the second but its last step (a
/// two-gemm loop ran at 0.55x its vendor baseline instead of 0.78x, run s6).
/// Returns the packed buffer (null when P is not in registers) and appends its stores to `pack`
/// and a fence on it to `fences`; registers it with cx.packed_a for the wgmma lowering.
ir::Buffer pack_register_operand(LowerContext& cx, const ir::Gemm* g2, std::vector<ir::Stmt>& pack,
                                 std::vector<ir::Stmt>& fences) {
  if (cx.layouts.gemms.at(g2) != GemmKind::wgmma_rs) return nullptr;
  const Buffer& A = g2->a.buffer;
  const FragmentLayout& la = cx.layouts.fragment(A);
  const int64_t words = la.regs_per_thread() / 2;
  ir::Buffer packed =
      ir::make_buffer(A->name + "_packed", Scope::local, DType::i32, {Expr(words)}, cx.k.uid, {});
  auto elem = [&](int64_t r) {
    return call_expr("tp.raw", {ir::Load::make(cx.reg(A), la.reg_index(Expr(r)))}, A->dtype);
  };
  for (int64_t j = 0; j < words; ++j)
    pack.push_back(ir::Store::make(
        packed, {Expr(j)},
        call_expr("tp::cg::pack_bits", {elem(2 * j), elem(2 * j + 1)}, DType::i32), {}));
  fences.push_back(
      call("tp::warpgroup::fence_operand", {call_expr("tp.buf", {}, DType::i32, {packed})}));
  cx.packed_a[A->uid] = packed;
  return packed;
}

/// Compiler fences on every f32 register fragment that work[from, to) mentions.
std::vector<ir::Stmt> fence_fragments(const LowerContext& cx, const std::vector<ir::Stmt>& work,
                                      size_t from, size_t to) {
  std::vector<ir::Stmt> out;
  for (const auto& [uid, regs] : cx.regs) {
    bool used = false;
    for (size_t i = from; i < to; ++i)
      used |= mentions_buffer(work[i], uid);
    if (!used || regs->dtype != DType::f32) continue;
    if (regs->shape.size() == 1)
      out.push_back(
          call("tp::warpgroup::fence_operand", {call_expr("tp.buf", {}, DType::f32, {regs})}));
    else
      for (int64_t p = 0; p < *regs->shape[0].as_int(); ++p)
        out.push_back(call("tp::warpgroup::fence_operand",
                           {call_expr("tp.regrow", {Expr(p)}, DType::f32, {regs})}));
  }
  return out;
}

/// The pipelined loop with its second gemm deferred by one iteration (the loop's defer_last_gemm
/// schedule): iteration k issues the first gemm (work[0]) on block k and waits for it, runs the
/// leading `if` statements, issues the second gemm (work.back()) on block k-1 (its B still in stage
/// k-1), runs the element-wise window while it runs, then waits for it, frees stage k-1 and runs
/// the rest (the statements that touch the second gemm's A or C: rescaling C, casting and packing
/// A for the next issue). The first iteration is peeled (no second gemm yet) and the last second
/// gemm follows the loop. No branch may sit between the second gemm's issue and its wait: at any
/// control-flow join ptxas waits for every wgmma in flight (seen in the SASS of the first
/// version, run s6), so the leading `if`s run before the issue and the k > 0 test is the loop's
/// start rather than an `if`.
///
/// With ping-pong as well (`turn_wait` and `turn_pass` defined), each issue of the tensor cores
/// is one turn: the first gemm of block k and the second of block k-1 (the first iteration's
/// turn has the first gemm only, the last second gemm has a turn of its own). A warpgroup's
/// element-wise window then runs while the other warpgroups' gemms keep the tensor cores busy,
/// instead of every warpgroup reaching its window at the same time.
void lower_deferred_loop(LowerContext& cx, const std::vector<ir::Stmt>& work, const Expr& n,
                         const Expr& g, const Var& k, const Var& stage, const Var& phase,
                         const std::string& release, const ir::Stmt& turn_wait,
                         const ir::Stmt& turn_pass, std::vector<ir::Stmt>& out) {
  const int S = cx.plan.stages;
  const auto* g2 = ir::as<ir::Gemm>(work.back());
  size_t split = work.size() - 1;
  for (size_t i = work.size() - 2; i >= 1; --i)
    if (mentions_buffer(work[i], g2->a.buffer->uid) || mentions_buffer(work[i], g2->c.buffer->uid))
      split = i;
  auto with_stage = [&](const Expr& st, const ir::Stmt& gemm) {
    std::map<uint64_t, Expr> saved = cx.stage;
    for (auto& [uid, e] : cx.stage)
      e = st;
    ir::Stmt lowered = lower_stmt(cx, gemm);
    cx.stage = saved;
    return lowered;
  };
  const Buffer& acc = cx.reg(g2->c.buffer);
  std::vector<ir::Stmt> fence_acc;
  for (int p = 0; p < cx.layouts.fragment(g2->c.buffer).slabs; ++p)
    fence_acc.push_back(call("tp::warpgroup::fence_operand",
                             {call_expr("tp.regrow", {Expr(p)}, DType::f32, {acc})}));
  std::vector<ir::Stmt> pack_a;
  ir::Buffer packed = pack_register_operand(cx, g2, pack_a, fence_acc);
  // The leading `if` statements that open the work after the first gemm.
  size_t leading_ifs = 1;
  while (leading_ifs < split && ir::as<ir::IfThenElse>(work[leading_ifs]))
    ++leading_ifs;
  const std::vector<ir::Stmt> fence_window = fence_fragments(cx, work, leading_ifs, split);
  // One iteration; `second` is false for the peeled first one.
  auto iteration = [&](bool second) {
    Expr prev = (g + (S - 1)) % S;
    std::vector<ir::Stmt> iter = {
        call("tp::sm90::mbarrier_wait_parity", {bar_addr(cx, stage), phase})};
    // The first gemm is waited for before the second is issued: with both groups in flight,
    // ptxas waits for all of them before the window's first use of an accumulator (a wait<1>
    // between does not help; seen in the SASS of small test kernels). With one group in flight
    // it spreads the second gemm's k16 steps through the window and waits after it.
    cx.wgmma_in_flight = 0;
    const bool turns = turn_wait.defined();
    if (turns) iter.push_back(turn_wait);
    iter.push_back(lower_stmt(cx, work[0]));
    if (turns && !second) iter.push_back(turn_pass);
    for (size_t i = 1; i < leading_ifs; ++i)
      iter.push_back(lower_stmt(cx, work[i]));
    if (second) {
      cx.wgmma_in_flight = 1;
      if (turns) cx.after_commit = turn_pass;
      iter.push_back(with_stage(prev, work.back()));
      cx.wgmma_in_flight = 0;
    }
    for (size_t i = leading_ifs; i < split; ++i)
      iter.push_back(lower_stmt(cx, work[i]));
    if (second) {
      // Pin the window before the wait: its results are used only after it, and without these
      // fences the compiler sinks the whole window below the wait (seen in the SASS).
      iter.insert(iter.end(), fence_window.begin(), fence_window.end());
      iter.push_back(call("tp::warpgroup::wait_group<0>"));
      iter.insert(iter.end(), fence_acc.begin(), fence_acc.end());
      iter.push_back(call(release, {bar_addr(cx, prev + S)}));
    }
    for (size_t i = split; i + 1 < work.size(); ++i)
      iter.push_back(lower_stmt(cx, work[i]));
    iter.insert(iter.end(), pack_a.begin(), pack_a.end());
    return ir::Let::make(stage, g % S, ir::Let::make(phase, (g / S) % 2, seq(iter)));
  };
  const uint64_t kid = ir::as<ir::Variable>(k)->uid;
  if (packed) out.push_back(ir::Allocate::make(packed, {}));
  out.push_back(if_then(n > 0, substitute(iteration(false), {{kid, Expr(0)}})));
  out.push_back(serial_for(k, Expr(1), n - 1, iteration(true)));
  // The last block's second gemm, from the last stage, which is then freed.
  Expr last = (g + n + (S - 1)) % S; // g = it + k with k = 0 here: it + n - 1
  if (turn_wait.defined()) cx.after_commit = turn_pass;
  ir::Stmt second_last = substitute(with_stage(last, work.back()), {{kid, Expr(0)}});
  std::vector<ir::Stmt> tail;
  if (turn_wait.defined()) tail.push_back(turn_wait);
  tail.push_back(second_last);
  tail.push_back(substitute(call(release, {bar_addr(cx, last + S)}), {{kid, Expr(0)}}));
  out.push_back(if_then(n > 0, seq(tail)));
  if (packed) cx.packed_a.erase(g2->a.buffer->uid);
}

/// Per-thread register counts after `setmaxnreg`, for `blocks` blocks per SM of T consumer
/// threads plus the 128-thread producer warpgroup.
struct RegisterSplit {
  int producer = 0, consumer = 0;
};

/// The rule: `setmaxnreg.inc` takes registers from a pool the block owns, and blocks until the
/// pool has them (PTX ISA), so a split the pool cannot pay hangs the consumers. The pool is what
/// the block was launched with: its T + 128 threads times the per-thread count that
/// `__launch_bounds__(T + 128, blocks)` leaves ptxas, i.e. the block's share of the SM's 65,536
/// registers (all, or 1 / blocks) rounded down to whole multiples of 8 a thread, at most 255.
/// The producer only computes TMA coordinates, so it gives registers back; the consumers take
/// what it frees. `setmaxnreg` counts are multiples of 8 in [24, 256], and consumers stop at
/// 240, which leaves ptxas headroom below the 255 a thread can address. The producer keeps 40
/// (its coordinate arithmetic then never spills) when that still lets the consumers reach 240,
/// else drops to the minimum 24. So one block of T = 128 gets 40/240, T = 256 gets 24/240 and
/// T = 384 gets 24/160; two blocks of T = 128 get 24/232, three 24/136 (launched at 80 a
/// thread, not a third of the file: 85 is not a multiple of 8).
RegisterSplit split_registers(int T, int blocks) {
  const int producer_threads = 128, cap = 240, floor_regs = 24, roomy = 40;
  const int total = T + producer_threads;
  const int launched = std::min(255, 65536 / (blocks * total)) / 8 * 8;
  const int pool = total * launched;
  auto consumer_for = [&](int producer) {
    return std::min(cap, (pool - producer_threads * producer) / T / 8 * 8);
  };
  const int producer = consumer_for(roomy) >= cap ? roomy : floor_regs;
  return {producer, consumer_for(producer)};
}

} // namespace

ir::Stmt lower_warp_specialized(LowerContext& cx) {
  const PipelinePlan& plan = cx.plan;
  const auto* body = ir::as<ir::Seq>(cx.k.body);
  const int S = plan.stages, T = cx.consumer_threads();
  const RegisterSplit regs = split_registers(T, cx.k.blocks_per_sm);
  const bool persistent = plan.persistent;
  std::map<const ir::Copy*, int> load_index;
  for (size_t i = 0; i < plan.loads.size(); ++i)
    load_index[plan.loads[i].copy] = static_cast<int>(i);

  // Persistent kernels loop over tiles; `tile` is the current one and `it` (a one-element local
  // array) counts the pipeline iterations of earlier tiles, so stage and parity continue across
  // tiles. The prologue barrier (2S) becomes tile_full: the producer arrives on it once per tile
  // after posting the tile's index in the slot (2S+2), with the prologue loads' bytes.
  Var tj("tj"), tile("tile");
  ir::Buffer it_buf = ir::make_buffer("tp_it", Scope::local, DType::i32, {Expr(1)}, cx.k.uid, {});
  Expr it = persistent ? Expr(ir::Load::make(it_buf, {Expr(0)})) : Expr(0);
  Expr tiles = call_expr("tp.tiles", {}, DType::i32);
  Expr sched = call_expr("tp.sched", {}, DType::i32);
  Expr tile_full = bar_addr(cx, Expr(2 * S)), tile_empty = bar_addr(cx, Expr(2 * S + 1));
  Expr slot = bar_addr(cx, Expr(2 * S + 2));
  auto init_it = [&] {
    return seq({ir::Allocate::make(it_buf, {}), ir::Store::make(it_buf, {Expr(0)}, Expr(0), {})});
  };
  auto advance_it = [&](const Expr& n) { return ir::Store::make(it_buf, {Expr(0)}, it + n, {}); };
  auto leave = [] { return call("tp.break"); };

  // Producer: one elected thread issues the prologue loads, then the loop's loads.
  std::vector<ir::Stmt> prologue;
  int64_t pro_bytes = 0;
  for (const TmaLoad& l : plan.loads)
    if (!l.in_loop) pro_bytes += l.bytes;
  if (pro_bytes > 0) {
    prologue.push_back(
        call("tp::sm90::mbarrier_arrive_expect_tx", {bar_addr(cx, Expr(2 * S)), Expr(pro_bytes)}));
    for (const TmaLoad& l : plan.loads)
      if (!l.in_loop)
        prologue.push_back(
            issue_tma(cx, l, load_index[l.copy], Expr(0), bar_addr(cx, Expr(2 * S))));
  } else if (persistent) {
    prologue.push_back(call("tp::sm90::mbarrier_arrive", {tile_full}));
  }
  Var k = plan.loop->var;
  Var stage("stage"), phase("phase");
  // The pipeline iteration: k within a tile, it + k across a persistent kernel's tiles.
  Expr g = persistent ? it + k : Expr(k);
  int64_t stage_bytes = 0;
  std::vector<ir::Stmt> loads;
  for (const TmaLoad& l : plan.loads)
    if (l.in_loop) {
      stage_bytes += l.bytes;
      loads.push_back(issue_tma(cx, l, load_index[l.copy], stage, bar_addr(cx, stage)));
    }
  const std::string wait = "tp::sm90::mbarrier_wait_parity";
  auto bit_flip = [](const Expr& e) { return ir::Binary::make(ir::BinOp::bit_xor, e, Expr(1)); };
  ir::Stmt producer_iter =
      seq({call(wait, {bar_addr(cx, stage + S), bit_flip(phase)}),
           call("tp::sm90::mbarrier_arrive_expect_tx", {bar_addr(cx, stage), Expr(stage_bytes)}),
           seq(loads)});
  producer_iter = ir::Let::make(phase, (g / S) % 2, producer_iter);
  producer_iter = ir::Let::make(stage, g % S, producer_iter);
  // The lets the loads' offsets read (PipelinePlan::producer_lets), evaluated here too.
  auto lowered_lets = [&](const std::vector<ir::Stmt>& lets) {
    std::vector<ir::Stmt> out;
    for (const ir::Stmt& l : lets)
      out.push_back(lower_stmt(cx, l));
    return out;
  };
  if (!plan.producer_loop_lets.empty()) {
    std::vector<ir::Stmt> it_lets = lowered_lets(plan.producer_loop_lets);
    it_lets.push_back(producer_iter);
    producer_iter = ir::Seq::make(it_lets);
  }
  Expr n = lower_expr(cx, plan.loop->extent);
  ir::Stmt producer_work = seq({ir::Seq::make(lowered_lets(plan.producer_lets)), seq(prologue),
                                serial_for(k, Expr(0), n, producer_iter)});
  if (persistent) {
    // Take a ticket; wait until the consumers are done with the previous tile's index and
    // prologue tiles; post the ticket (past the end: the consumers leave too).
    ir::Stmt per_tile =
        seq({call(wait, {tile_empty, bit_flip(tj % 2)}), call("tp::cg::sched_post", {slot, tile}),
             if_then(tile >= tiles, seq({call("tp::sm90::mbarrier_arrive", {tile_full}), leave()})),
             call("tp.block_indices", {tile}), producer_work, advance_it(n)});
    // The blocks of a cluster work on one pair of tiles at a time, so they cannot take tickets
    // one by one: the pairs are dealt in a fixed order instead (cluster c takes c, c + the
    // number of clusters, ...), which both blocks compute alike. Tiles whose loops run
    // the same number of times (a GEMM's) lose no balance to the fixed order.
    const bool dealt = plan.cluster > 1;
    Expr ticket = dealt ? call_expr("tp::cg::sched_dealt<" + std::to_string(plan.cluster) + ">",
                                    {tj}, DType::i32)
                        : call_expr("tp::cg::sched_next", {sched}, DType::i32);
    per_tile = ir::Let::make(tile, ticket, per_tile);
    producer_work = seq({init_it(), serial_for(tj, Expr(0), tiles + 1, per_tile)});
    if (!dealt) producer_work = seq({producer_work, call("tp::cg::sched_finish", {sched})});
  }
  ir::Stmt producer =
      seq({call("tp::warpgroup::setmaxnreg_dec<" + std::to_string(regs.producer) + ">"),
           if_then(cx.tid == T, producer_work)});

  // Consumer: the kernel body without the producer's copies; the loop waits for full stages
  // and frees them when its iteration is done.
  std::vector<ir::Stmt> consumer; // one tile's work (the whole body when not persistent)
  if (pro_bytes > 0 && !persistent)
    consumer.push_back(call(wait, {bar_addr(cx, Expr(2 * S)), Expr(0)}));
  const auto* lb = ir::as<ir::Seq>(plan.loop->body);
  std::vector<ir::Stmt> work;
  for (const ir::Stmt& b : lb ? lb->stmts : std::vector<ir::Stmt>{plan.loop->body})
    if (const auto* c = ir::as<ir::Copy>(b); !(c && plan.load_for(c))) work.push_back(b);
  // A loop that only accumulates one shared x shared wgmma keeps one group in flight: the
  // stage read by iteration k-1 is released once its group is known complete, in iteration k.
  // (Flattened lets among the work are scalar statements: they do not count.)
  std::vector<ir::Stmt> ops;
  for (const ir::Stmt& b : work)
    if (!ir::as<ir::Let>(b)) ops.push_back(b);
  const auto* only_gemm = ops.size() == 1 ? ir::as<ir::Gemm>(ops[0]) : nullptr;
  // A loop whose element-wise work fills rotated tiles (PlanRotation.h) keeps its last gemm's
  // group in flight the same way, through the next iteration's work; the group is drained just
  // before the barrier that publishes the next tile.
  const bool rotating = !plan.rotated.empty() && !plan.defer_second_gemm;
  size_t gemm_at = work.size(); // where a rotating loop's gemm stands in its work
  if (rotating) {
    while (gemm_at > 0 && !ir::as<ir::Gemm>(work[gemm_at - 1]))
      --gemm_at;
    internal_assert(gemm_at > 0) << "a rotating loop's work has its gemm (PlanRotation.cpp)";
    only_gemm = ir::as<ir::Gemm>(work[--gemm_at]);
  }
  // Keeping a group in flight releases its stage one iteration late, so the producer refills
  // another stage meanwhile: with one stage it would wait for the release, which waits for the
  // refill (a hang, random program 4418 on an H100).
  bool overlap = only_gemm && cx.layouts.gemms.count(only_gemm) &&
                 cx.layouts.gemms.at(only_gemm) == GemmKind::wgmma_ss && S >= 2;
  // Its accumulator's clear before the loop becomes scale-d = 0 on the first iteration's first
  // k16 step (and a clear after the loop for the case of no iterations): zeroing the registers
  // up front made ptxas serialize all wgmma of the kernel (C7515, in its log for every GEMM).
  ir::Stmt folded = overlap ? foldable_clear(body, plan.loop, only_gemm->c.buffer) : ir::Stmt();
  // A persistent kernel's consumers release tile_empty after the last statement that reads a
  // prologue tile (often the loop itself, which reads it every iteration), or at once when
  // there is none.
  std::set<uint64_t> prologue_tiles;
  for (const TmaLoad& l : plan.loads)
    if (!l.in_loop) prologue_tiles.insert(l.copy->dst.buffer->uid);
  const ir::StmtNode* last_prologue_use = nullptr;
  for (const ir::Stmt& s : body->stmts)
    for (uint64_t uid : prologue_tiles)
      if (!(ir::as<ir::Copy>(s) && plan.load_for(ir::as<ir::Copy>(s))) && mentions_buffer(s, uid))
        last_prologue_use = s.get();
  ir::Stmt release_tile = call("tp::cg::warp_arrive", {tile_empty});
  if (persistent && !last_prologue_use) consumer.push_back(release_tile);
  // Ping-pong turns: named barrier 2 + w belongs to consumer warpgroup w; it waits there (with
  // the previous warpgroup's 128 arrivals) before its turn and arrives on the next one's after
  // issuing its first gemm. A turn spans a loop's second gemm and the next iteration's first:
  // one wait before the loop, one per iteration, and one arrival per iteration plus one after
  // the loop, so every tile is balanced. The last warpgroup gives the first its initial turn,
  // and the first takes the one arrival left over at the end.
  const int W = T / 128;
  Expr wg = cx.tid / 128;
  ir::Stmt turn_wait = call("tp::block::named_sync", {wg + 2, Expr(256)});
  ir::Stmt turn_pass = call("tp::block::named_arrive", {(wg + 1) % W + 2, Expr(256)});
  // In a cluster, a stage is released in every CTA: the peer's producer refills it here too.
  const std::string release =
      plan.cluster > 1 ? "tp::cg::warp_arrive_cluster<" + std::to_string(plan.cluster) + ">"
                       : "tp::cg::warp_arrive";
  // After the loop a staged tile holds its last iteration's stage (stage_after_loop); the
  // statements after it read stage 0 before (random programs 3054 and 3367 on an H100,
  // 2026-12-07). A persistent kernel releases that stage to the next tile's loads as its loop
  // ends, so there nothing after the loop may touch a staged tile. (The cp.async plan does not
  // stage a tile used outside its loop, PlanCpAsync.cpp, nor PlanRotation rotate one.)
  bool after_loop = false;
  auto after_the_loop = [&] {
    cx.stage.clear();
    after_loop = true;
    if (!persistent) cx.stage_after_loop(plan.staged, n, S);
  };
  for (const ir::Stmt& s : body->stmts) {
    if (const auto* c = ir::as<ir::Copy>(s); c && plan.load_for(c)) continue;
    if (folded.defined() && s.same_as(folded)) continue;
    if (s.get() != static_cast<const ir::StmtNode*>(plan.loop)) {
      if (after_loop && persistent) {
        BufferAccesses a = buffer_accesses(s);
        for (uint64_t u : plan.staged)
          if (a.touches(u))
            user_error() << "shared tile '" << a.buffers.at(u)->name
                         << "' is filled by the pipelined loop at " << plan.loop->loc.str()
                         << " and used after it at " << s->loc.str()
                         << "; a persistent kernel hands the loop's buffers to its next tile "
                            "when the loop ends. Use the tile inside the loop, copy it to "
                            "another tile there, or leave out persistent";
      }
      consumer.push_back(lower_stmt(cx, s));
      if (persistent && s.get() == last_prologue_use) consumer.push_back(release_tile);
      continue;
    }
    for (uint64_t uid : plan.staged)
      cx.stage[uid] = stage;
    for (uint64_t uid : plan.rotated)
      cx.stage[uid] = g % 2;
    if (plan.defer_second_gemm) {
      lower_deferred_loop(cx, work, n, g, k, stage, phase, release,
                          plan.pingpong ? turn_wait : ir::Stmt(),
                          plan.pingpong ? turn_pass : ir::Stmt(), consumer);
      if (persistent && s.get() == last_prologue_use) consumer.push_back(release_tile);
      after_the_loop();
      continue;
    }
    std::vector<ir::Stmt> iter = {call(wait, {bar_addr(cx, stage), phase})};
    cx.wgmma_in_flight = overlap ? 1 : 0;
    if (folded.defined()) cx.first_scale_d = k > 0;
    int gemm_no = 0;
    // Rotation: the barrier(s) right before the gemm publish the tile the work just filled;
    // the previous gemm, which read the other buffer, must be complete in every warpgroup
    // before the one after next overwrites it, so each warpgroup drains it before arriving.
    size_t drain_at = gemm_at; // then back over the barriers just before the gemm
    while (rotating && drain_at > 0 && is_barrier(work[drain_at - 1]))
      --drain_at;
    for (size_t w = 0; w < work.size(); ++w) {
      const ir::Stmt& b = work[w];
      if (w == drain_at) {
        const Buffer& acc = cx.reg(only_gemm->c.buffer);
        iter.push_back(call("tp::warpgroup::wait_group<0>"));
        for (int p = 0; p < cx.layouts.fragment(only_gemm->c.buffer).slabs; ++p)
          iter.push_back(call("tp::warpgroup::fence_operand",
                              {call_expr("tp.regrow", {Expr(p)}, DType::f32, {acc})}));
      }
      // Ping-pong: the first gemm hands the turn on once issued; the second waits for it.
      bool is_gemm = false;
      ir::for_each_stmt(b, [&](const ir::Stmt& x) { is_gemm |= ir::as<ir::Gemm>(x) != nullptr; });
      if (plan.pingpong && is_gemm && gemm_no++ == 0)
        cx.after_commit = turn_pass;
      else if (plan.pingpong && is_gemm)
        iter.push_back(turn_wait);
      iter.push_back(lower_stmt(cx, b));
    }
    cx.wgmma_in_flight = 0;
    cx.first_scale_d = Expr();
    if (overlap) {
      Expr prev = (g + (S - 1)) % S;
      iter.push_back(if_then(k > 0, call(release, {bar_addr(cx, prev + S)})));
    } else {
      iter.push_back(call(release, {bar_addr(cx, stage + S)}));
    }
    ir::Stmt one = ir::Let::make(stage, g % S, ir::Let::make(phase, (g / S) % 2, seq(iter)));
    if (plan.pingpong) consumer.push_back(turn_wait);
    consumer.push_back(serial_for(k, Expr(0), n, one));
    if (plan.pingpong) consumer.push_back(turn_pass);
    if (overlap) {
      // Drain the last group before anything reads the accumulator.
      const Buffer& acc = cx.reg(only_gemm->c.buffer);
      consumer.push_back(call("tp::warpgroup::wait_group<0>"));
      for (int p = 0; p < cx.layouts.fragment(only_gemm->c.buffer).slabs; ++p)
        consumer.push_back(call("tp::warpgroup::fence_operand",
                                {call_expr("tp.regrow", {Expr(p)}, DType::f32, {acc})}));
      // The last stage is released here; a single-tile kernel never refills it.
      if (persistent)
        consumer.push_back(
            if_then(n > 0, call(release, {bar_addr(cx, (it + n + (S - 1)) % S + S)})));
      if (folded.defined()) consumer.push_back(if_then(n == 0, lower_stmt(cx, folded)));
    }
    if (persistent && s.get() == last_prologue_use) consumer.push_back(release_tile);
    after_the_loop();
  }
  std::vector<ir::Stmt> consumer_all = {
      call("tp::warpgroup::setmaxnreg_inc<" + std::to_string(regs.consumer) + ">")};
  if (plan.pingpong) consumer_all.push_back(if_then(wg == W - 1, turn_pass));
  if (!persistent) {
    consumer_all.insert(consumer_all.end(), consumer.begin(), consumer.end());
  } else {
    // Wait for the tile's index (and prologue tiles), leave past the end, otherwise run the
    // body for that tile.
    consumer.insert(consumer.begin(),
                    {if_then(tile >= tiles, leave()), call("tp.block_indices", {tile})});
    consumer.push_back(advance_it(n));
    if (consumers_write_shared(cx)) consumer.push_back(cx.barrier());
    ir::Stmt per_tile = seq(
        {call(wait, {tile_full, tj % 2}),
         ir::Let::make(tile, call_expr("tp::cg::sched_read", {slot}, DType::i32), seq(consumer))});
    consumer_all.push_back(init_it());
    consumer_all.push_back(serial_for(tj, Expr(0), tiles + 1, per_tile));
  }
  if (plan.pingpong) consumer_all.push_back(if_then(wg == 0, turn_wait));
  // Each empty barrier counts the consumer warps of every CTA that shares the stage.
  int consumer_warps = T / 32 * plan.cluster;
  std::vector<ir::Stmt> init = {call("tp::cg::init_pipeline<" + std::to_string(S) + ">",
                                     {bar_addr(cx, Expr(0)), Expr(consumer_warps)})};
  if (persistent) init.push_back(call("tp::cg::init_persistent", {tile_empty, Expr(T / 32)}));
  ir::Stmt roles = if_then(cx.tid >= T, producer, seq(consumer_all));
  if (plan.cluster == 1)
    return seq({if_then(cx.tid == 0, seq(init)), call("tp::block::sync"), roles});
  // A peer signals this CTA's barriers only after they exist, and this CTA exits only after
  // the peer's last arrival on them.
  return seq({if_then(cx.tid == 0, seq(init)), call("tp::cg::cluster_sync"), roles,
              call("tp::cg::cluster_sync")});
}

} // namespace tp::passes
