// Staging a pipelined loop's fragment loads through shared memory (see StageFragmentLoads.h).
#include "passes/StageFragmentLoads.h"

#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "ir/IRVisitor.h"
#include "passes/BufferAccesses.h"
#include "passes/ChunkAlignment.h"
#include "passes/IssueAhead.h"
#include "passes/LowerContext.h"

namespace tp::passes {

namespace {

using ir::Scope;

uint64_t uid_of(const Var& v) {
  return ir::as<ir::Variable>(v)->uid;
}

class Stage : public ir::IRMutator {
public:
  explicit Stage(const ir::KernelNode& k) : body_(k.body) {
    ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
      const auto* f = ir::as<ir::For>(s);
      pipelined_ += f && f->for_kind == ir::ForKind::pipelined;
    });
  }
  std::vector<FragmentStaging> loops;

protected:
  using IRMutator::visit;

  ir::Stmt visit(const ir::For* op, const ir::Stmt& self) override {
    ir::Stmt s = IRMutator::visit(op, self); // loops inside the body first
    const auto* f = ir::as<ir::For>(s);
    if (f->for_kind != ir::ForKind::pipelined) return s;
    FragmentStaging report;
    report.loc = f->loc;
    report.stages = f->schedule.stages;
    ir::Stmt out = rewrite(f, report);
    loops.push_back(report);
    return out.defined() ? out : s;
  }

private:
  ir::Stmt body_; // the kernel's
  int pipelined_ = 0;
  /// What the kernel writes: walked only for a loop that asks for staging (most kernels have
  /// none, and every kernel's lowering runs this pass).
  std::optional<std::set<uint64_t>> kernel_writes_;

  /// The staged loop (with its shared tiles, versioned when alignment is known only at run
  /// time), or undefined with report.reason set.
  ir::Stmt rewrite(const ir::For* f, FragmentStaging& report) {
    const ir::LoopSchedule& sc = f->schedule;
    if (sc.copies != ir::CopyEngine::cp_async) {
      report.reason = "the loop does not ask for copies = cp_async (fragment loads are staged "
                      "only on request)";
      return {};
    }
    if (pipelined_ > 1) {
      report.reason = "the kernel has more than one pipelined loop";
      return {};
    }
    if (sc.stages < 2 || sc.pingpong || sc.defer_last_gemm) {
      report.reason = "its schedule asks for more than a cp.async pipeline";
      return {};
    }
    if (!kernel_writes_) kernel_writes_ = buffer_accesses(body_).writes;
    const auto* seq = ir::as<ir::Seq>(f->body);
    const std::vector<ir::Stmt> body = seq ? seq->stmts : std::vector<ir::Stmt>{f->body};
    std::vector<size_t> picked;
    std::set<const ir::Let*> lets;
    std::string first_why;
    for (size_t i = 0; i < body.size(); ++i) {
      const auto* c = ir::as<ir::Copy>(body[i]);
      if (!c || c->src.buffer->scope != Scope::global) continue;
      if (c->dst.buffer->scope == Scope::shared) {
        report.reason = copy_name(c) + " goes to shared memory: the shared-memory plans take "
                                       "this loop as it is";
        return {};
      }
      if (c->dst.buffer->scope != Scope::fragment) continue;
      std::string why = ir::is_whole(c->dst)
                            ? issue_ahead_blocker(f, body, i, *kernel_writes_, lets)
                            : copy_name(c) + " writes only part of its fragment";
      if (why.empty())
        picked.push_back(i);
      else if (first_why.empty())
        first_why = why;
    }
    // The loop asked for cp.async and has no copy into shared memory: staging is the only way
    // to honour it.
    if (picked.empty())
      user_error(f->loc) << "pipelined: copies = cp_async cannot be honoured: "
                         << (first_why.empty() ? "no copy at the top of the loop's body goes "
                                                 "from global memory into shared memory or "
                                                 "into a whole fragment"
                                               : first_why);
    // A picked copy's innermost offset in iteration `value`: the body's lets it reads are
    // evaluated for that iteration.
    auto column = [&](const ir::Copy* c, const Expr& value) {
      std::map<uint64_t, Expr> sub = {{uid_of(f->var), value}};
      for (const ir::Stmt& s : body)
        if (const auto* l = ir::as<ir::Let>(s); l && lets.count(l))
          sub[uid_of(l->var)] = substitute(l->value, sub);
      return substitute(c->src.min.back(), sub);
    };
    Expr aligned;
    for (size_t at : picked) {
      const auto* c = ir::as<ir::Copy>(body[at]);
      Expr ok = chunks_aligned(c->src.buffer, column(c, f->min), column(c, f->min + 1));
      if (known(ok) == false)
        user_error(f->loc) << "pipelined: copies = cp_async cannot be honoured: " << copy_name(c)
                           << " can never move whole 16-byte chunks (its rows or its tile are "
                              "not 16-byte aligned); drop copies = cp_async to run the loop "
                              "serially";
      aligned = conj(aligned, ok);
    }
    std::vector<ir::Stmt> out, staged_body;
    std::map<size_t, ir::Buffer> tiles;
    for (size_t at : picked) {
      const auto* c = ir::as<ir::Copy>(body[at]);
      const ir::Buffer& frag = c->dst.buffer;
      ir::Buffer t = ir::make_buffer(frag->name + "_staged", Scope::shared, c->src.buffer->dtype,
                                     frag->shape, frag->kernel_uid, c->loc);
      tiles[at] = t;
      out.push_back(ir::Allocate::make(t, c->loc));
      report.fragments.push_back(frag->name);
      report.tensors.push_back(c->src.buffer->name);
    }
    for (size_t i = 0; i < body.size(); ++i) {
      auto it = tiles.find(i);
      if (it == tiles.end()) {
        staged_body.push_back(body[i]);
        continue;
      }
      const auto* c = ir::as<ir::Copy>(body[i]);
      staged_body.push_back(ir::Copy::make(c->src, ir::whole(it->second), c->loc));
      staged_body.push_back(ir::Copy::make(ir::whole(it->second), c->dst, c->loc));
    }
    ir::Stmt staged = ir::For::make(f->var, f->min, f->extent, ir::ForKind::pipelined, sc,
                                    ir::Seq::make(std::move(staged_body), f->body->loc), f->loc);
    if (known(aligned) == true) {
      out.push_back(staged);
    } else {
      report.versioned = true;
      ir::Stmt serial =
          ir::For::make(f->var, f->min, f->extent, ir::ForKind::serial, {}, f->body, f->loc);
      out.push_back(ir::IfThenElse::make(aligned, staged, serial, f->loc));
    }
    return ir::Seq::make(std::move(out), f->loc);
  }
};

std::string quoted(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i ? ", '" : "'") + names[i] + "'";
  return s;
}

} // namespace

StagedBody stage_fragment_loads(const ir::KernelNode& k) {
  Stage p(k);
  StagedBody out;
  out.body = p.mutate(k.body);
  out.loops = std::move(p.loops);
  return out;
}

std::string to_string(const FragmentStaging& f) {
  if (f.fragments.empty()) return "fragment loads not staged: " + f.reason;
  std::ostringstream os;
  os << "fragment loads into " << quoted(f.fragments) << " staged through shared memory for a "
     << f.stages << "-stage pipeline";
  if (f.versioned)
    os << ", when the chunks of " << quoted(f.tensors)
       << " are 16-byte aligned at run time (else the loop runs serially, as written)";
  return os.str();
}

} // namespace tp::passes
