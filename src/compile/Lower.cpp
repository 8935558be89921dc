// The CUDA backend's pass list, in order:
//   verify -> flatten lets -> sink fragment loads into accumulator loops -> stage pipelined
//   fragment loads through shared memory -> infer layouts -> plan pipeline -> insert barriers ->
//   (re-)infer and plan on the barrier'd IR -> plan shared memory
//   -> lower tile ops -> emit CUDA C++.
#include "compile/Lower.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "codegen/cuda/CodeGenCUDA.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/Verifier.h"
#include "passes/ChooseSharedSwizzles.h"
#include "passes/FlattenLets.h"
#include "passes/InsertBarriers.h"
#include "passes/LowerTileOps.h"
#include "passes/SinkFragmentLoads.h"
#include "passes/StageFragmentLoads.h"
#include "passes/StageUnalignedStores.h"

namespace tp::cuda {

namespace {

bool debug_ir() {
  const char* v = std::getenv("TILEPILOT_DEBUG_IR");
  return v && std::string(v) == "1";
}

/// Prints `text()` after `pass` when TILEPILOT_DEBUG_IR=1. The text is made only then: printing
/// the whole kernel after every pass was most of a lowering's time (the tuner lowers every
/// config of its space to estimate it).
template <typename Text>
void dump(const char* pass, Text text) {
  if (debug_ir()) std::cerr << "=== after " << pass << " ===\n" << text() << "\n";
}

std::string plan_text(const passes::PipelinePlan& p, const passes::SmemPlan& s,
                      const std::vector<passes::FragmentStaging>& staged,
                      const std::vector<passes::StoreStaging>& stores) {
  std::ostringstream os;
  for (const passes::StoreStaging& st : stores)
    if (st.staged)
      os << "// " << (st.loc.known() ? st.loc.str() + ": " : std::string()) << passes::to_string(st)
         << "\n";
  for (const passes::FragmentStaging& f : staged)
    if (!f.fragments.empty())
      os << "// pipelined loop" << (f.loc.known() ? " at " + f.loc.str() : std::string()) << ": "
         << passes::to_string(f) << "\n";
  if (p.warp_specialized) {
    os << "// pipeline: warp-specialized, " << p.stages << " stages, producer warpgroup issues "
       << p.loads.size() << " TMA load(s)\n";
    if (p.cluster > 1)
      os << "// cluster: " << p.cluster << " blocks along grid y; multicast loads:"
         << std::count_if(p.loads.begin(), p.loads.end(), [](auto& l) { return l.multicast; })
         << "\n";
    if (p.persistent && p.cluster > 1)
      os << "// persistent: about one cluster per " << p.cluster << " SMs, columns of " << p.cluster
         << " tiles dealt to the clusters in turn\n";
    else if (p.persistent)
      os << "// persistent: about one block per SM, tiles taken from a launch-wide counter\n";
    if (p.pingpong) os << "// ping-pong: consumer warpgroups take turns at the tensor cores\n";
    if (p.defer_second_gemm)
      os << "// defer_last_gemm: the loop's second gemm runs one iteration late, during the next "
            "one's element-wise work\n";
    if (!p.rotated.empty())
      os << "// rotated: " << p.rotated.size()
         << " shared tile(s) the loop's element-wise work fills get two buffers; the work fills "
            "one while the previous iteration's gemm reads the other\n";
    if (!p.rotation_note.empty()) os << "// rotation: " << p.rotation_note << "\n";
    if (!p.stores.empty())
      os << "// TMA stores: " << p.stores.size() << " accumulator copy(ies) through two "
         << p.store_staging_bytes() / 2 << "-byte chunk buffers at shared offset "
         << s.store_staging << "\n";
    if (!p.store_note.empty()) os << "// not TMA-stored: " << p.store_note << "\n";
  } else {
    os << "// pipeline: not warp-specialized ("
       << (p.reason.empty() ? "no pipelined loop" : p.reason) << ")\n";
    if (!p.not_applied.empty()) os << "// schedule: " << p.not_applied << "\n";
  }
  // The plan each pipelined loop got, its depth and bytes per stage, and why the others not.
  std::string kind = passes::plan_kind(p);
  int64_t stage_bytes = 0;
  for (const auto& [uid, slot] : s.slots)
    if (p.staged.count(uid)) stage_bytes += slot.stage_bytes;
  if (p.warp_specialized || p.cp_async) {
    os << "// pipelined loop: " << kind << ", " << p.stages << " stages, " << stage_bytes
       << " bytes per stage\n";
    if (p.cp_async) os << "//   not tma-warp-specialized: " << p.reason << "\n";
    if (p.warp_specialized) os << "//   not cp.async multistage: TMA warp specialization taken\n";
  } else if (p.cp_async_reason != "no pipelined loop") {
    os << "// pipelined loop: serial, 1 stage (asked for " << p.requested_stages << ")\n"
       << "//   not tma-warp-specialized: " << p.reason << "\n"
       << "//   not cp.async multistage: " << p.cp_async_reason << "\n";
    for (const passes::FragmentStaging& f : staged)
      if (f.fragments.empty()) os << "//   " << passes::to_string(f) << "\n";
  }
  os << "// shared memory: " << s.total_bytes << " bytes\n";
  return os.str();
}

/// The passes before tile-op lowering: what sizes the launch (shared memory, producer threads,
/// TMA loads) is known here.
struct Planned {
  ir::KernelNode k; // barrier'd; the plans point into its nodes
  passes::StagedBody staged;
  passes::StagedStores stores;
  passes::LayoutInfo layouts;
  passes::PipelinePlan plan;
  passes::SmemPlan smem;
};

Planned plan_kernel(const Kernel& kernel, const passes::Target& t) {
  const ir::KernelNode& k0 = kernel.node();
  ir::verify(k0);
  // Lets become statements of their scope, so the passes below see the tile ops after a let
  // where they stand (a let inside a pipelined loop must not hide its copies).
  ir::KernelNode kf = k0;
  bool lets = false;
  ir::for_each_stmt(k0.body, [&](const ir::Stmt& s) { lets |= ir::as<ir::Let>(s) != nullptr; });
  if (lets) {
    kf.body = passes::flatten_lets(k0.body);
    dump("flatten_lets", [&] { return ir::to_string(kf); });
  }
  // An epilogue's bias or residual is read where the accumulator loop uses it (the layouts say
  // which fragments are accumulators; they are inferred again on the result below).
  ir::Stmt sunk = passes::sink_fragment_loads(kf, passes::infer_layouts(kf, t));
  if (!sunk.same_as(kf.body)) {
    kf.body = sunk;
    dump("sink_fragment_loads", [&] { return ir::to_string(kf); });
  }
  // A pipelined loop that asks for copies = cp_async has its loads into fragments staged
  // through shared memory, where the cp.async plan can issue them ahead.
  passes::StagedBody staged = passes::stage_fragment_loads(kf);
  if (!staged.body.same_as(kf.body)) {
    kf.body = staged.body;
    dump("stage_fragment_loads", [&] { return ir::to_string(kf); });
  }
  // An element-wise fragment's store into rows that may not be 16-byte aligned goes through a
  // shared tile when they are not, cut at the destination's own 16-byte blocks.
  passes::StagedStores stores = passes::stage_unaligned_stores(kf, t);
  if (!stores.body.same_as(kf.body)) {
    kf.body = stores.body;
    dump("stage_unaligned_stores", [&] { return ir::to_string(kf); });
  }
  // Barriers first (they need to know which buffers are shared), then plan again on the
  // barrier'd IR, whose nodes the pipeline plan points into.
  passes::LayoutInfo l0 = passes::infer_layouts(kf, t);
  passes::PipelinePlan p0 = passes::plan_pipeline(kf, l0, t);
  ir::KernelNode k = kf;
  k.body = passes::insert_barriers(kf, l0, p0);
  dump("insert_barriers", [&] { return ir::to_string(k); });
  passes::LayoutInfo layouts = passes::infer_layouts(k, t);
  passes::PipelinePlan plan = passes::plan_pipeline(k, layouts, t);
  passes::plan_tma_stores(k, layouts, t, plan);
  // After the pipeline plan: a TMA box keeps the swizzle the hardware writes.
  passes::choose_shared_swizzles(k, plan, layouts);
  passes::SmemPlan smem = passes::plan_shared_memory(k, layouts, plan, t);
  dump("infer_layouts", [&] { return passes::to_string(k, layouts); });
  return {std::move(k),       std::move(staged), std::move(stores),
          std::move(layouts), std::move(plan),   std::move(smem)};
}

/// The TMA-free variant's target when a tensor TMA would load (`tma_params`) has rows that are not
/// 16-byte multiples; `t` otherwise.
passes::Target tma_for_shapes(passes::Target t, const std::vector<int>& tma_params,
                              const std::vector<ir::ArgDesc>& args) {
  for (int p : tma_params) {
    const ir::ArgDesc& a = args.at(p);
    if (a.shape.back() * dtype_bytes(a.dtype) % 16 != 0) t.allow_tma = false;
  }
  return t;
}

} // namespace

LoweredKernel lower_kernel(const Kernel& kernel, const passes::Target& t) {
  const ir::KernelNode& k0 = kernel.node();
  Planned pl = plan_kernel(kernel, t);
  const ir::KernelNode& k = pl.k;
  const passes::LayoutInfo& layouts = pl.layouts;
  const passes::PipelinePlan& plan = pl.plan;
  const passes::SmemPlan& smem = pl.smem;
  passes::LowerContext cx(k, t, layouts, plan, smem);
  ir::Stmt lowered = passes::lower_tile_ops(cx);
  dump("lower_tile_ops", [&] { return ir::to_string(lowered); });

  LoweredKernel out;
  out.kernel = kernel;
  out.target = t;
  out.entry = "tp_" + k.name;
  out.block_threads = k.threads + plan.producer_threads();
  out.smem_bytes = smem.total_bytes;
  out.cluster_y = plan.cluster;
  out.persistent = plan.persistent;
  for (const passes::TmaLoad& l : plan.loads)
    out.tmas.push_back({l.param, l.box, l.swizzle_bytes});
  for (const passes::TmaStore& s : plan.stores)
    out.tmas.push_back({s.param, s.box, 128, true});
  out.tma_store_candidates = plan.tma_store_candidates;
  out.paired_params = cx.paired_params;
  out.param_written.assign(k.params.size(), false);
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    auto mark = [&](const ir::Buffer& b) {
      for (size_t i = 0; i < k.params.size(); ++i)
        if (k.params[i]->uid == b->uid) out.param_written[i] = true;
    };
    if (const auto* c = ir::as<ir::Copy>(s)) mark(c->dst.buffer);
    if (const auto* st = ir::as<ir::Store>(s)) mark(st->buffer);
    if (const auto* a = ir::as<ir::AtomicAdd>(s)) mark(a->buffer);
    if (const auto* f = ir::as<ir::Fill>(s)) mark(f->dst.buffer);
  });
  cuda::EmitInput in{k,         lowered,           layouts, plan, smem, t, out.block_threads,
                     out.entry, out.param_written, cx.tid};
  out.source = emit_cuda(in);
  dump("codegen", [&] { return out.source; });
  out.canonical_ir = ir::to_string(k0, true) + "\n// target " + t.str();
  std::string writes;
  for (const std::string& n : cx.write_notes)
    writes += "// " + n + "\n";
  out.lowered_text = passes::to_string(k, layouts) +
                     plan_text(plan, smem, pl.staged.loops, pl.stores.stores) + writes +
                     ir::to_string(lowered);
  out.body_with_barriers = k.body;
  return out;
}

uint64_t even_row_params(uint64_t paired, const std::vector<ir::ArgDesc>& args) {
  uint64_t m = 0;
  for (size_t i = 0; i < args.size() && i < 64; ++i) {
    if (!((paired >> i) & 1)) continue;
    const ir::ArgDesc& a = args[i];
    // An even row length keeps a pair's second element in bounds with its first; even
    // outer strides (a view's) keep every row's start, hence the pair, aligned.
    bool even = !a.shape.empty() && a.shape.back() % 2 == 0;
    if (even && !a.strides.empty()) {
      even = a.strides.back() == 1;
      for (size_t d = 0; even && d + 1 < a.strides.size(); ++d)
        even = a.strides[d] % 2 == 0;
    }
    if (even) m |= uint64_t{1} << i;
  }
  return m;
}

bool tma_rows(const ir::ArgDesc& a) {
  const int64_t eb = dtype_bytes(a.dtype);
  if (a.strides.empty()) return !a.shape.empty() && a.shape.back() * eb % 16 == 0;
  if (a.strides.back() != 1) return false;
  for (size_t d = 0; d + 1 < a.strides.size(); ++d)
    if (a.strides[d] <= 0 || a.strides[d] * eb % 16 != 0 || a.strides[d] * eb >= (int64_t{1} << 40))
      return false;
  return true;
}

uint64_t tma_store_params(uint64_t candidates, const std::vector<ir::ArgDesc>& args) {
  uint64_t m = ~uint64_t{0};
  for (size_t i = 0; i < args.size() && i < 64; ++i)
    if (((candidates >> i) & 1) && !tma_rows(args[i])) m &= ~(uint64_t{1} << i);
  return m;
}

LoweredKernel lower_for_shapes(const Kernel& k, passes::Target t,
                               const std::vector<ir::ArgDesc>& args) {
  // Which tensors TMA loads and which take paired or TMA stores come from any variant's
  // lowering (as at launch); at most one more lowering gives the variant these shapes take.
  LoweredKernel lk = lower_kernel(k, t);
  const passes::Target first = t;
  std::vector<int> tma_params;
  for (const TmaParam& p : lk.tmas)
    if (!p.store) tma_params.push_back(p.param);
  t = tma_for_shapes(t, tma_params, args);
  // A TMA-store candidate is paired-stored in the variants that store it from registers.
  t.even_rows = even_row_params(lk.paired_params | lk.tma_store_candidates, args);
  // Without TMA nothing is TMA-stored: the default bits keep one variant.
  if (t.allow_tma) t.tma_store_params = tma_store_params(lk.tma_store_candidates, args);
  const bool same = t.allow_tma == first.allow_tma && t.even_rows == first.even_rows &&
                    t.tma_store_params == first.tma_store_params;
  return same ? lk : lower_kernel(k, t);
}

LaunchResources plan_for_shapes(const Kernel& k, const passes::Target& t,
                                const std::vector<ir::ArgDesc>& args) {
  // Paired stores (even_rows) change only how tile ops lower, never the plans; TMA loads and
  // TMA stores do.
  Planned pl = plan_kernel(k, t);
  std::vector<int> tma_params;
  for (const passes::TmaLoad& l : pl.plan.loads)
    tma_params.push_back(l.param);
  passes::Target shaped = tma_for_shapes(t, tma_params, args);
  if (shaped.allow_tma)
    shaped.tma_store_params = tma_store_params(pl.plan.tma_store_candidates, args);
  if (shaped.allow_tma != t.allow_tma || shaped.tma_store_params != t.tma_store_params)
    pl = plan_kernel(k, shaped);
  return {pl.k.threads + pl.plan.producer_threads(), pl.smem.total_bytes};
}

} // namespace tp::cuda

namespace tp::passes {

Target Target::parse(const std::string& arch) {
  // sm_90a-notma names the variant launched when a tensor's rows are not 16-byte aligned.
  if (arch == "sm_90a-notma") {
    Target t;
    t.allow_tma = false;
    return t;
  }
  if (arch != "sm_90a" && arch != "sm_80")
    user_error() << "unsupported --arch '" << arch
                 << "'; use sm_90a (H100/H200), sm_90a-notma (without TMA) or sm_80 (A100)";
  Target t;
  t.arch = arch;
  return t;
}

} // namespace tp::passes
