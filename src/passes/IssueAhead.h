// Which copies of a loop's body may be issued iterations ahead of the one they belong to: the
// rule the cp.async multistage plan (PlanCpAsync.cpp) and the staging of fragment loads
// (StageFragmentLoads.h) share. A copy can be issued ahead only when everything it
// reads is known for that later iteration: its offsets may read the loop variable, values fixed
// before the loop, and lets of the body that read nothing but those, global tensors the kernel
// never writes and tiles the loop never writes; and it must be the first access of its
// destination in the body, so no earlier statement would see the later iteration's data.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace tp::passes {

/// "the copy from 'A' into 'a'": how a plan's reasons name a copy.
std::string copy_name(const ir::Copy* c);

/// Why copy `body[at]` (a top-level statement of `loop`'s body) cannot be issued ahead, or ""
/// when it can; adds to `lets` the body's lets its offsets read (directly or through other
/// lets). `kernel_writes`: the uids of every buffer the kernel writes.
std::string issue_ahead_blocker(const ir::For* loop, const std::vector<ir::Stmt>& body, size_t at,
                                const std::set<uint64_t>& kernel_writes,
                                std::set<const ir::Let*>& lets);

} // namespace tp::passes
