// The compile pool's lifetime rule: its workers are detached, but once the pool is destroyed
// (no compile overran its limit) nothing the caller handed it is still owned by a worker. The
// compile hook, and the results compiled ahead and never waited for, are freed on the caller's
// thread before the destructor returns. They own device resources in the CUDA hooks; freed on
// a worker after the process began to exit, they were released to a driver already unloaded
// (ASan: a heap-use-after-free in `tilepilot tune` ending on a GPU fault).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "autotune/CompilePool.h"

using namespace tp;
using namespace tp::autotune;

namespace {

/// Counts its destructions, and those on a thread other than the test's.
struct Tally {
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> freed{0}, freed_elsewhere{0};
};
struct Probe {
  explicit Probe(Tally* t) : tally(t) {}
  Probe(const Probe&) = delete;
  Tally* tally;
  ~Probe() {
    tally->freed_elsewhere += std::this_thread::get_id() != tally->caller;
    ++tally->freed;
  }
};

std::vector<ops::Config> configs(int n) {
  std::vector<ops::Config> out;
  for (int i = 0; i < n; ++i)
    out.push_back({{"i", i}});
  return out;
}

// Many pools, so that a worker still holding the hook when the destructor returns would show.
TEST(CompilePool, HookIsFreedOnTheCallersThreadBeforeTheDestructorReturns) {
  for (int round = 0; round < 100; ++round) {
    Tally tally;
    {
      auto probe = std::make_shared<Probe>(&tally);
      CompilePool pool([probe](const ops::Config&) { return CompiledCandidate{}; }, configs(4),
                       /*threads=*/2, /*window=*/4, /*limit_s=*/60);
      probe.reset(); // the pool's copy of the hook now holds the only reference
      EXPECT_EQ(pool.wait(0).kind, CompilePool::Outcome::Kind::ok);
    }
    ASSERT_EQ(tally.freed.load(), 1) << "round " << round << ": a worker still holds the hook";
    ASSERT_EQ(tally.freed_elsewhere.load(), 0) << "round " << round;
  }
}

// Results compiled ahead and never waited for are freed with the pool, on the caller's thread.
TEST(CompilePool, ResultsNeverWaitedForAreFreedWithThePool) {
  for (int round = 0; round < 20; ++round) {
    Tally tally;
    std::atomic<int> compiled{0};
    {
      CompilePool pool(
          [&](const ops::Config&) {
            CompiledCandidate c;
            c.artifact = std::make_shared<Probe>(&tally);
            ++compiled;
            return c;
          },
          configs(3), /*threads=*/3, /*window=*/3, /*limit_s=*/60);
      EXPECT_EQ(pool.wait(0).kind, CompilePool::Outcome::Kind::ok);
      while (compiled.load() < 3) // the two compiled ahead finish before the pool goes
        std::this_thread::yield();
    }
    ASSERT_EQ(tally.freed.load(), 3) << "round " << round;
    ASSERT_EQ(tally.freed_elsewhere.load(), 0) << "round " << round;
  }
}

} // namespace
