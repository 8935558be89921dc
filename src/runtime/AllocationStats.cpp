// Process-wide counters behind AllocationStats.h (atomics: buffers are made on several threads).
#include "runtime/AllocationStats.h"

#include <atomic>

namespace tp::rt {

namespace {

std::atomic<uint64_t> g_live{0}, g_peak{0};

void raise_peak(uint64_t now) {
  uint64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {}
}

} // namespace

AllocationStats device_allocation_stats() {
  return {g_live.load(), g_peak.load()};
}

void reset_device_allocation_peak() {
  g_peak.store(g_live.load());
}

void note_device_alloc(size_t bytes) {
  raise_peak(g_live.fetch_add(bytes) + bytes);
}

void note_device_free(size_t bytes) {
  g_live.fetch_sub(bytes);
}

} // namespace tp::rt
