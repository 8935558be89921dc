// Device memory allocated through DeviceBuffer, counted: the bytes live now and the high-water
// mark since the last reset. The pilot's memory stage reads peaks from here rather than from
// cuMemGetInfo alone, because cuMemGetInfo is a snapshot of the whole device (other processes
// included) and misses anything allocated and freed between two snapshots; every buffer our
// kernel path and the vendor wrappers allocate (inputs, outputs, workspaces) is a DeviceBuffer.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tp::rt {

struct AllocationStats {
  uint64_t live_bytes = 0; // DeviceBuffers alive now
  uint64_t peak_bytes = 0; // most live at any moment since the last reset
};

AllocationStats device_allocation_stats();

/// Sets the high-water mark to the bytes live now, so that the next peak measures what follows.
void reset_device_allocation_peak();

/// Called by DeviceBuffer after a successful cuMemAlloc and before cuMemFree. Thread-safe.
void note_device_alloc(size_t bytes);
void note_device_free(size_t bytes);

} // namespace tp::rt
