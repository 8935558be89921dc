// The compile pool: detached workers sharing one State through shared_ptr, so an abandoned
// worker can outlive the pool (and the tuner) without touching freed memory.
#include "autotune/CompilePool.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tilepilot/error.h"

namespace tp::autotune {

namespace {
using Clock = std::chrono::steady_clock;
enum class SlotState { queued, running, done };
} // namespace

struct CompilePool::State {
  std::function<CompiledCandidate(const ops::Config&)> compile;
  std::vector<ops::Config> configs;
  size_t window = 1;
  double limit_s = 0;
  int target = 1; // workers wanted, not counting ones stuck in abandoned compiles

  std::mutex mu;
  std::condition_variable cv;
  size_t next_job = 0, current = 0;
  bool cancel = false;
  int live = 0, stuck = 0; // live workers; of them, running an abandoned compile
  struct Slot {
    SlotState state = SlotState::queued;
    bool abandoned = false;
    Clock::time_point started;
    Outcome outcome;
  };
  std::vector<Slot> slots;

  bool has_work() const { return next_job < configs.size() && next_job < current + window; }
};

namespace {

void worker(std::shared_ptr<CompilePool::State> s) {
  std::unique_lock<std::mutex> lock(s->mu);
  while (true) {
    s->cv.wait(lock, [&] { return s->cancel || s->has_work(); });
    if (s->cancel) break;
    size_t i = s->next_job++;
    s->slots[i].state = SlotState::running;
    s->slots[i].started = Clock::now();
    lock.unlock();
    CompilePool::Outcome out;
    try {
      out.compiled = s->compile(s->configs[i]);
    } catch (const UserError& e) {
      out.kind = CompilePool::Outcome::Kind::user_error;
      out.error = reason_text(e);
    } catch (const std::exception& e) {
      out.kind = CompilePool::Outcome::Kind::error;
      out.error = e.what();
    } catch (...) {
      out.kind = CompilePool::Outcome::Kind::error;
      out.error = "compile hook threw a non-standard exception";
    }
    lock.lock();
    auto& slot = s->slots[i];
    out.seconds = std::chrono::duration<double>(Clock::now() - slot.started).count();
    slot.state = SlotState::done;
    if (slot.abandoned) {
      // Late result: the caller has moved on. Leave if a replacement took this worker's place.
      --s->stuck;
      if (s->live - s->stuck > s->target) break;
    } else {
      slot.outcome = std::move(out);
    }
    s->cv.notify_all();
  }
  --s->live;
  s->cv.notify_all();
}

void spawn(const std::shared_ptr<CompilePool::State>& s) {
  ++s->live;
  std::thread(worker, s).detach();
}

// Marks slot i abandoned (its compile overran) and replaces its worker. Caller holds the lock.
void abandon(const std::shared_ptr<CompilePool::State>& s, size_t i) {
  s->slots[i].abandoned = true;
  ++s->stuck;
  if (!s->cancel) spawn(s);
}

} // namespace

CompilePool::CompilePool(std::function<CompiledCandidate(const ops::Config&)> compile,
                         std::vector<ops::Config> configs, int threads, size_t window,
                         double limit_s)
    : state_(std::make_shared<State>()) {
  internal_assert(compile) << "CompilePool needs a compile hook";
  state_->compile = std::move(compile);
  state_->configs = std::move(configs);
  state_->slots.resize(state_->configs.size());
  state_->window = std::max<size_t>(window, 1);
  // <= 0 means no limit; a week stands in for "forever" without overflowing the clock.
  state_->limit_s = limit_s > 0 ? std::min(limit_s, 7 * 86400.0) : 7 * 86400.0;
  state_->target = std::max(threads, 1);
  std::lock_guard<std::mutex> lock(state_->mu);
  for (int t = 0; t < state_->target; ++t)
    spawn(state_);
}

CompilePool::~CompilePool() {
  auto& s = state_;
  std::unique_lock<std::mutex> lock(s->mu);
  s->cancel = true;
  s->cv.notify_all();
  const auto limit = std::chrono::duration<double>(s->limit_s);
  while (s->live > s->stuck) {
    // Running compiles finish or overrun; an overrun one is abandoned so we never hang here.
    auto deadline = Clock::time_point::max();
    for (size_t i = 0; i < s->slots.size(); ++i) {
      auto& slot = s->slots[i];
      if (slot.state != SlotState::running || slot.abandoned) continue;
      auto end = slot.started + std::chrono::duration_cast<Clock::duration>(limit);
      if (Clock::now() >= end)
        abandon(s, i);
      else
        deadline = std::min(deadline, end);
    }
    if (s->live <= s->stuck) break;
    if (deadline == Clock::time_point::max())
      s->cv.wait(lock);
    else
      s->cv.wait_until(lock, deadline);
  }
  if (s->stuck > 0) return; // an abandoned compile still runs the hook; its worker frees it
  // No worker calls the hook or touches a slot again, but an exiting one may still hold the
  // State for a moment. The hook and the compiled results own the caller's resources (device
  // buffers, streams, modules), so they are freed here, on the caller's thread, before the
  // caller can return and the process exit: freed on a detached thread, they could outlive
  // the driver they are released to.
  std::function<CompiledCandidate(const ops::Config&)> hook = std::move(s->compile);
  s->compile = nullptr;
  std::vector<State::Slot> slots = std::move(s->slots);
  s->slots.clear();
  lock.unlock();
}

CompilePool::Outcome CompilePool::wait(size_t i) {
  auto& s = state_;
  std::unique_lock<std::mutex> lock(s->mu);
  internal_assert(i < s->slots.size()) << "CompilePool::wait(" << i << ") out of range";
  s->current = std::max(s->current, i);
  s->cv.notify_all();
  const auto limit =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s->limit_s));
  while (true) {
    auto& slot = s->slots[i];
    if (slot.state == SlotState::done) return std::move(slot.outcome);
    if (slot.state == SlotState::running) {
      auto end = slot.started + limit;
      if (Clock::now() >= end) {
        abandon(s, i);
        Outcome out;
        out.kind = Outcome::Kind::timed_out;
        out.seconds = s->limit_s;
        return out;
      }
      s->cv.wait_until(lock, end);
    } else {
      s->cv.wait(lock);
    }
  }
}

} // namespace tp::autotune
