// The copy rule's pairing of elements (Copy in ir/IR.h), shared by the interpreter and the CUDA
// lowering so that both pair the same elements: which pairs of extents a copy accepts, and
// where the element at given coordinates of one side lands on the other.
#pragma once
#include <cstdint>
#include <vector>

#include "tilepilot/expr.h"

namespace tp::ir {

/// Can a copy pair regions whose squeezed extents are `a` and `b`: equal, or the same number of
/// elements with the same innermost extent (each row of one is a row of the other).
inline bool copy_compatible(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a == b) return true;
  if (a.empty() || b.empty() || a.back() != b.back()) return false;
  int64_t na = 1, nb = 1;
  for (int64_t e : a)
    na *= e;
  for (int64_t e : b)
    nb *= e;
  return na == nb;
}

/// Coordinates over squeezed extents `from` of one side of a copy, as coordinates over `to` of
/// the other side: the element with the same row-major position. The innermost coordinate is
/// kept (the innermost extents agree); the outer ones are linearized over `from` and split over
/// `to`. `from == to` returns c. @pre copy_compatible(from, to), c.size() == from.size().
template <class T>
std::vector<T> regroup(const std::vector<T>& c, const std::vector<int64_t>& from,
                       const std::vector<int64_t>& to) {
  if (from == to) return c;
  // Both have at least two extents: with one, the element counts would force equality.
  T flat = c[0];
  for (size_t k = 1; k + 1 < from.size(); ++k)
    flat = flat * T(from[k]) + c[k];
  std::vector<T> out(to.size());
  out.back() = c.back();
  for (size_t k = to.size() - 1; k-- > 1;) {
    out[k] = flat % T(to[k]);
    flat = flat / T(to[k]);
  }
  out[0] = flat;
  return out;
}

} // namespace tp::ir
