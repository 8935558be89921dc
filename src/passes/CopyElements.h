// The element accesses of a copy, shared by its lowerings (LowerCopy.cpp, LowerChunkCopies.cpp):
// where copy coordinates land in each side's buffer, one element's read or write under the
// global bounds rules (out-of-bounds reads are zero, writes dropped), and whether an unaligned
// run may be read as the aligned 16-byte blocks around it; and the notes a copy's lowering leaves.
#pragma once
#include <string>
#include <vector>

#include "passes/LowerContext.h"

namespace tp::passes {

/// The dimensions of a box whose extent is not 1.
std::vector<int> nonunit(const std::vector<int64_t>& ext);

/// The full index into region r's buffer of the element at squeezed coordinates `c`.
std::vector<Expr> place(const LowerContext& cx, const ir::Region& r, const std::vector<Expr>& c);

/// Copy coordinates `c` over `from`, the squeezed extents of the copy's other side, as
/// coordinates of region r: the element at the same row-major position (ir/CopyShape.h, as the
/// interpreter pairs them). The same coordinates when the two sides' extents agree.
std::vector<Expr> onto(const ir::Region& r, const std::vector<Expr>& c,
                       const std::vector<int64_t>& from);

/// Load of one element of region r (zero when out of bounds of a global tensor).
Expr read(const LowerContext& cx, const ir::Region& r, const std::vector<Expr>& c);

/// Store of one element of region r (dropped when out of bounds of a global tensor).
ir::Stmt write(const LowerContext& cx, const ir::Region& r, const std::vector<Expr>& c,
               const Expr& v);

/// Whether the 16 - E bytes after a run ending at `idx_end` belong to tensor g, so that an
/// unaligned run may be loaded as the whole aligned 16-byte blocks holding it (ld_vec's
/// `slack`): further along the row, or a next row exists (the bytes past a row's end are the
/// next row's, or its padding in the same allocation). The last run of a tensor's last row takes
/// the narrower loads.
Expr read_slack(const LowerContext& cx, const ir::Region& g, const std::vector<Expr>& idx_end);

/// Whether the kernel lets a warp's lanes move a row's runs together in a copy's `load`
/// direction (global -> registers or shared) or store direction: the "row_lanes" annotation, a
/// bit each (1 loads, 2 stores; default neither until measured on a GPU).
bool row_lanes_allowed(const LowerContext& cx, bool load);

/// Adds "copy at <loc>: <what>" to what `show --stage lowered` says, once however often the copy
/// is lowered (a pipeline's prologue lowers its prefetched copies again).
void copy_note(LowerContext& cx, const ir::Copy* op, const std::string& what);

} // namespace tp::passes
