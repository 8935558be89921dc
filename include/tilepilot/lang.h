// The tile-language builder. A kernel is built by running C++ that records statements into the
// current scope: `kernel(...)` opens a kernel, each op appends to it, and loops/conditionals
// open nested scopes. Every op takes the caller's source location so that an invalid kernel is
// reported where it was written.
#pragma once
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "tilepilot/error.h"
#include "tilepilot/expr.h"

namespace tp {
namespace ir {
struct BufferNode;
struct KernelNode;
} // namespace ir

using Loc = std::source_location;

/// The first index of an element access or tile box; it records where the access was written.
struct Idx {
  template <typename T>
  Idx(T v, Loc l = Loc::current()) : e(v), loc(l) {}
  Expr e;
  Loc loc;
};

/// A reference to one element of a tensor or tile: reads as an Expr, assignment records a Store.
class ElemRef {
public:
  ElemRef(std::shared_ptr<const ir::BufferNode> b, std::vector<Expr> idx, Loc loc);
  operator Expr() const;
  ElemRef& operator=(const Expr& v);
  ElemRef& operator=(const ElemRef& v) { return *this = Expr(v); }
  ElemRef& operator+=(const Expr& v);
  ElemRef& operator-=(const Expr& v);
  ElemRef& operator*=(const Expr& v);

  std::shared_ptr<const ir::BufferNode> buffer;
  std::vector<Expr> indices;
  Loc loc;
};

/// A box of a tensor or tile: `A.tile(row0, col0)` (extents come from the other side of the
/// copy) or `A.tile({row0, col0}, {64, 32})`.
struct TileRef {
  std::shared_ptr<const ir::BufferNode> buffer;
  std::vector<Expr> min;
  std::vector<int64_t> extent; // empty: taken from the tile on the other side
  Loc loc;
};

/// Tag of a strided Tensor: `Tensor A("A", {M, K}, bf16, strided)`.
struct Strided {};
inline constexpr Strided strided{};

/// A global tensor: a kernel parameter. By default row-major and contiguous (strides are the
/// products of the inner extents, folded into the addressing). Declared `strided`, each
/// dimension's stride (elements, outermost first, any non-negative value) is a parameter bound
/// at launch from the argument's strides (DeviceTensor::strides, HostView::strides), so a slice
/// of a bigger buffer or a transposed operand is passed without a copy.
class Tensor {
public:
  Tensor(const std::string& name, std::vector<Expr> shape, DType dtype, Loc loc = Loc::current());
  Tensor(const std::string& name, std::vector<Expr> shape, DType dtype, Strided,
         Loc loc = Loc::current());
  template <typename... Is>
  ElemRef operator()(Idx i0, Is... is) const {
    return elem({i0.e, Expr(is)...}, i0.loc);
  }
  ElemRef elem(std::vector<Expr> idx, Loc loc = Loc::current()) const;
  TileRef tile(std::vector<Expr> min, Loc loc = Loc::current()) const;
  TileRef tile(std::vector<Expr> min, std::vector<int64_t> extent, Loc loc = Loc::current()) const;
  template <typename... Is>
  TileRef tile(Idx i0, Is... is) const {
    return tile(std::vector<Expr>{i0.e, Expr(is)...}, i0.loc);
  }
  const std::shared_ptr<const ir::BufferNode>& buffer() const { return buffer_; }
  const std::string& name() const;
  DType dtype() const;
  bool is_strided() const;

private:
  std::shared_ptr<const ir::BufferNode> buffer_;
};

/// A scalar kernel parameter (f32 or i32), passed by value at launch and usable in any
/// expression: `Scalar scale("scale", f32); ... y(i) = x(i) * scale;`.
class Scalar : public Var {
public:
  explicit Scalar(const std::string& name, DType t = f32, Loc loc = Loc::current());
};

/// One kernel parameter: a Tensor or a Scalar.
class Param {
public:
  Param(const Tensor& t) : tensor_(t.buffer()) {}
  Param(const Scalar& s) : scalar_(s) {}
  bool is_scalar() const { return tensor_ == nullptr; }
  const std::shared_ptr<const ir::BufferNode>& tensor() const { return tensor_; }
  const Expr& scalar() const { return scalar_; }

private:
  std::shared_ptr<const ir::BufferNode> tensor_;
  Expr scalar_;
};

/// A kernel's parameters in launch order: `{A, scale, B}` mixes Tensors and Scalars.
struct Params {
  Params(std::initializer_list<Param> ps) : list(ps) {}
  Params(std::vector<Param> ps) : list(std::move(ps)) {}
  Params(const std::vector<Tensor>& ts) : list(ts.begin(), ts.end()) {}
  std::vector<Param> list;
};

/// A tile: shared, fragment or local storage allocated inside a kernel.
class Tile {
public:
  explicit Tile(std::shared_ptr<const ir::BufferNode> b) : buffer_(std::move(b)) {}
  template <typename... Is>
  ElemRef operator()(Idx i0, Is... is) const {
    return elem({i0.e, Expr(is)...}, i0.loc);
  }
  ElemRef elem(std::vector<Expr> idx, Loc loc = Loc::current()) const;
  TileRef region(std::vector<Expr> min, std::vector<int64_t> extent,
                 Loc loc = Loc::current()) const;
  const std::shared_ptr<const ir::BufferNode>& buffer() const { return buffer_; }
  std::vector<int64_t> shape() const;
  DType dtype() const;

private:
  std::shared_ptr<const ir::BufferNode> buffer_;
};

/// An operand of a tile op: a whole tile or a box of a tensor/tile.
struct Operand {
  Operand(const Tile& t) : ref{t.buffer(), {}, {}, Loc::current()}, whole(true) {}
  Operand(TileRef r) : ref(std::move(r)) {}
  TileRef ref;
  bool whole = false;
};

/// A built kernel: immutable, shareable, printable (see ir/IRPrinter.h).
class Kernel {
public:
  Kernel() = default;
  explicit Kernel(std::shared_ptr<const ir::KernelNode> k) : node_(std::move(k)) {}
  const ir::KernelNode* operator->() const { return node_.get(); }
  const ir::KernelNode& node() const { return *node_; }
  const std::shared_ptr<const ir::KernelNode>& ptr() const { return node_; }
  bool defined() const { return node_ != nullptr; }

private:
  std::shared_ptr<const ir::KernelNode> node_;
};

struct Grid {
  std::vector<Expr> extents;
};
template <typename... Es>
Grid grid(Es... es) {
  return Grid{{Expr(es)...}};
}
struct Threads {
  int count;
};
inline Threads threads(int n) {
  return Threads{n};
}

/// Options of a kernel that are not part of its body.
struct KernelOptions {
  int64_t smem_limit = 0; // bytes of shared memory the kernel may use; 0 = the target's
  /// Blocks that are to run on one SM at once (1 to 4), for kernels that hide latency with
  /// more resident blocks rather than with a deeper pipeline. The compiler then keeps each
  /// block within its share of the SM: registers (the launch bound's minimum blocks, and the
  /// warp-specialized split of 64K / blocks registers) and shared memory (a user error past
  /// its share). Results never depend on it; the interpreter ignores it.
  int blocks_per_sm = 1;
};

/// Builds a kernel. `params` are the launch arguments in order (Tensors and Scalars); `body`
/// takes one Var per grid dimension (block indices x, y, z).
Kernel kernel(const std::string& name, Params params, Grid g, Threads t,
              std::function<void(Var)> body, KernelOptions opts = {}, Loc loc = Loc::current());
Kernel kernel(const std::string& name, Params params, Grid g, Threads t,
              std::function<void(Var, Var)> body, KernelOptions opts = {},
              Loc loc = Loc::current());
Kernel kernel(const std::string& name, Params params, Grid g, Threads t,
              std::function<void(Var, Var, Var)> body, KernelOptions opts = {},
              Loc loc = Loc::current());

/// Evaluates `value` once, here, and returns a Var that reads it for the rest of the enclosing
/// scope (the kernel body, loop, branch or parallel body `let` is called in). Use it for an
/// index or factor that many accesses share: an expression used directly is recomputed (and
/// compiled) at every use. Using the Var after that scope ends is an error.
Var let(const std::string& name, const Expr& value, Loc loc = Loc::current());

Tile alloc_shared(std::vector<int64_t> shape, DType t, Loc loc = Loc::current());
Tile alloc_fragment(std::vector<int64_t> shape, DType t, Loc loc = Loc::current());
Tile alloc_local(std::vector<int64_t> shape, DType t, Loc loc = Loc::current());

void copy(const Operand& src, const Operand& dst, Loc loc = Loc::current());
struct GemmOptions {
  bool trans_a = false, trans_b = false, clear = false;
};
void gemm(const Operand& a, const Operand& b, const Operand& c, GemmOptions o = {},
          Loc loc = Loc::current());
void fill(const Operand& dst, const Expr& value, Loc loc = Loc::current());
void clear(const Operand& dst, Loc loc = Loc::current());

enum class Reduction { max, min, sum, absmax };
void reduce(Reduction kind, const Tile& src, const Tile& dst, int dim, bool clear = true,
            Loc loc = Loc::current());
void reduce_max(const Tile& src, const Tile& dst, int dim, bool clear = true,
                Loc loc = Loc::current());
void reduce_sum(const Tile& src, const Tile& dst, int dim, bool clear = true,
                Loc loc = Loc::current());

void parallel(std::vector<int64_t> extents, std::function<void(Var)> body,
              Loc loc = Loc::current());
void parallel(std::vector<int64_t> extents, std::function<void(Var, Var)> body,
              Loc loc = Loc::current());
void parallel(std::vector<int64_t> extents, std::function<void(Var, Var, Var)> body,
              Loc loc = Loc::current());
void pipelined(const Expr& n, int stages, std::function<void(Var)> body, Loc loc = Loc::current());

/// A pipelined loop's schedule, stated by the kernel (docs/schedules.md). A request the loop's
/// structure cannot meet is a user error naming the reason, on every backend. A request for
/// hardware the target lacks (TMA, wgmma on sm_80 or on the sm_90a variant for unaligned rows)
/// runs the next plan down instead, and `tilepilot show` says so: a kernel runs everywhere.
struct Schedule {
  int stages = 2; // buffers per staged tile: iteration i + stages - 1's copies overlap i's work
  /// The engine of the loop's global-to-shared copies. automatic: TMA with a producer warpgroup
  /// where every copy and the target allow it, else cp.async multistage, else a serial loop.
  /// tma or cp_async: that engine, or a user error saying which copy prevents it.
  enum class Copies { automatic, tma, cp_async } copies = Copies::automatic;
  /// The loop's last gemm runs one iteration late, so it overlaps the next iteration's
  /// element-wise work. Needs exactly two gemms, one first and one last in the loop's work, and
  /// stages >= 2 (iteration i - 1's tiles stay while i's land).
  bool defer_last_gemm = false;
  /// Consumer warpgroups take turns at the tensor cores: one's element-wise work between the
  /// loop's two gemms overlaps another's gemms. Needs exactly two gemms and 256+ threads in
  /// whole warpgroups.
  bool pingpong = false;
};
void pipelined(const Expr& n, const Schedule& schedule, std::function<void(Var)> body,
               Loc loc = Loc::current());
void serial(const Expr& n, std::function<void(Var)> body, Loc loc = Loc::current());
void serial(const Expr& begin, const Expr& end, std::function<void(Var)> body,
            Loc loc = Loc::current());
void unrolled(int64_t n, std::function<void(Var)> body, Loc loc = Loc::current());
void if_then(const Expr& cond, std::function<void()> then_body, Loc loc = Loc::current());
void if_then_else(const Expr& cond, std::function<void()> then_body,
                  std::function<void()> else_body, Loc loc = Loc::current());

/// Element atomic add (any scope for the value, global or shared destination).
void atomic_add(const ElemRef& dst, const Expr& value, Loc loc = Loc::current());
/// Tile atomic add: dst box += src tile, element-wise.
void atomic_add(const Operand& dst, const Tile& src, Loc loc = Loc::current());

void print(const std::string& label, const Expr& value, Loc loc = Loc::current());
void print(const std::string& label, const Tile& tile, Loc loc = Loc::current());

/// Kernel annotations, integers the CUDA backend uses; they never change results: "swizzle"
/// (block rasterization panel width), "cluster" (2: pairs of blocks share staged tiles through
/// TMA multicast), "persistent" (1: about one block per SM loops over the tiles),
/// "paired_stores" (1: parallel loops over a gemm accumulator store two adjacent columns at
/// once), "tma_stores" (0: accumulators stored from registers), "shared_swizzle" (0: shared
/// tiles row-major), "staged_stores" (1: element-wise fragments store to unaligned rows
/// through a shared tile, in the destination's aligned blocks; 0, the default: directly),
/// "row_lanes" (which copies of a row's runs a warp's lanes make together: 0 none, the default; 1
/// loads, 2 stores, 3 both). An unknown key or a value out of range is a user error naming the
/// choices.
void annotate(const std::string& key, const std::string& value, Loc loc = Loc::current());

} // namespace tp
