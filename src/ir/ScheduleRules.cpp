// Structural rules of the stated loop schedules (docs/schedules.md).
#include "ir/ScheduleRules.h"

#include "ir/IRVisitor.h"

namespace tp::ir {

std::vector<Stmt> loop_work(const For* loop) {
  const auto* seq = as<Seq>(loop->body);
  std::vector<Stmt> stmts = seq ? seq->stmts : std::vector<Stmt>{loop->body};
  std::vector<Stmt> work;
  for (const Stmt& s : stmts) {
    const auto* c = as<Copy>(s);
    if (!(c && c->src.buffer->scope == Scope::global && c->dst.buffer->scope == Scope::shared))
      work.push_back(s);
  }
  return work;
}

int count_gemms(const For* loop) {
  int n = 0;
  for_each_stmt(loop->body, [&](const Stmt& s) { n += as<Gemm>(s) != nullptr; });
  return n;
}

void verify_schedule(const KernelNode& k, const For* loop) {
  const LoopSchedule& s = loop->schedule;
  const int gemms = count_gemms(loop);
  if (s.copies == CopyEngine::cp_async && s.stages < 2)
    user_error(loop->loc) << "pipelined: copies = cp_async with stages = " << s.stages
                          << " has nothing to issue ahead; ask for stages >= 2";
  if (s.defer_last_gemm) {
    const std::vector<Stmt> work = loop_work(loop);
    const bool ends = work.size() >= 2 && as<Gemm>(work.front()) && as<Gemm>(work.back());
    if (s.stages < 2)
      user_error(loop->loc) << "pipelined: defer_last_gemm needs stages >= 2 (iteration i - 1's "
                               "tiles stay while i's land), got stages = "
                            << s.stages;
    if (gemms != 2 || !ends)
      user_error(loop->loc) << "pipelined: defer_last_gemm needs a loop whose work starts and "
                               "ends with a gemm, with no other gemm; this loop has "
                            << gemms << " gemm" << (gemms == 1 ? "" : "s")
                            << (gemms == 2 ? ", not first and last" : "");
  }
  if (s.pingpong) {
    if (k.threads < 256 || k.threads % 128)
      user_error(loop->loc) << "pipelined: pingpong needs two or more consumer warpgroups "
                               "(threads a multiple of 128, at least 256); the kernel has "
                            << k.threads << " threads";
    if (gemms != 2)
      user_error(loop->loc) << "pipelined: pingpong turns are built around exactly two gemms "
                               "in the loop; this loop has "
                            << gemms;
  }
}

} // namespace tp::ir
