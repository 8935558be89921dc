// Counts over a kernel body that pass tests check a rewrite by: the shared tiles it allocates
// and the ifs it holds (a versioned rewrite adds one).
#pragma once
#include <map>
#include <string>

#include "ir/IRVisitor.h"

namespace tp::testing {

/// The shared tiles a body allocates: name -> dtype.
inline std::map<std::string, DType> shared_tiles(const ir::Stmt& body) {
  std::map<std::string, DType> out;
  ir::for_each_stmt(body, [&](const ir::Stmt& s) {
    if (const auto* a = ir::as<ir::Allocate>(s); a && a->buffer->scope == ir::Scope::shared)
      out[a->buffer->name] = a->buffer->dtype;
  });
  return out;
}

/// The if statements in a body.
inline int count_ifs(const ir::Stmt& body) {
  int n = 0;
  ir::for_each_stmt(body, [&](const ir::Stmt& s) { n += ir::as<ir::IfThenElse>(s) != nullptr; });
  return n;
}

} // namespace tp::testing
