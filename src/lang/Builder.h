// The builder's state while a kernel body runs: the stack of open scopes that ops append to,
// and the facts the immediate checks need (kernel identity, parallel depth, shared bytes).
#pragma once
#include <functional>
#include <map>
#include <source_location>
#include <vector>

#include "ir/IR.h"

namespace tp::lang {

struct KernelBuilder {
  uint64_t kernel_uid = 0;
  std::string kernel_name;
  std::vector<std::vector<ir::Stmt>> scopes;
  int parallel_depth = 0;
  int64_t smem_bytes = 0;
  int64_t smem_limit = 0;
  std::map<std::string, std::string> attrs;
  /// Numbers the kernel's tiles (shared0, frag1, ...). Per kernel, so that two builds of one
  /// config generate the same source and hence the same cache key.
  int tiles = 0;
};

/// The kernel being built on this thread, or a user error naming `op` when there is none.
KernelBuilder& current(const char* op, const SourceLoc& loc);
KernelBuilder* current_or_null();
void set_current(KernelBuilder* kb);
void append(ir::Stmt s);
SourceLoc to_loc(const std::source_location& l);
/// Runs `fill` with a fresh scope open and returns what it recorded as one statement.
ir::Stmt scoped(const std::function<void()>& fill);
/// User error unless `b` may be used by the kernel being built.
void check_owner(const ir::Buffer& b, const char* op, const SourceLoc& loc);

} // namespace tp::lang
