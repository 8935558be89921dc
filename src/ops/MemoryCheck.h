// Up-front memory checks: a problem's buffers are estimated from its shape and compared with
// the host's available memory (and the device's, for GPU runs) before anything is allocated,
// so a problem too large for the machine is a clear user error (bytes needed against bytes
// available) instead of the out-of-memory killer or a process that grows for minutes.
#pragma once
#include <cstdint>
#include <string>

#include "ops/Operator.h"

namespace tp::ops {

/// Bytes of the problem's arguments at their dtype (every input and output once), with a
/// margin for the reference and the checker's copies.
double problem_bytes(const Operator& op, const Problem& p);

/// The host memory the kernel may still allocate (MemAvailable, lowered by a cgroup limit);
/// 0 when unknown. TILEPILOT_HOST_MEMORY_BYTES overrides it (tests).
double host_available_bytes();

/// Bytes of a program's intermediates at their dtype.
double intermediate_bytes(const KernelProgram& prog);

/// User error naming the problem, the bytes it needs (problem_bytes plus `extra_bytes`, e.g. a
/// program's intermediates) and what the host (and, when device_bytes > 0, the device) has,
/// with the fix. `where` prefixes the message ("check").
void require_memory(const Operator& op, const Problem& p, const std::string& where,
                    double device_bytes = 0, double extra_bytes = 0);

} // namespace tp::ops
