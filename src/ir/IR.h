// The tile-level IR: expression and statement nodes as plain structs with public fields.
// Every node kind comes from the X-macro lists below, which also generate the visitor, the
// mutator and the printer's dispatch. Conventions:
//   - Shapes and extents are in elements; tile extents are compile-time constants.
//   - A Region is `buffer[min[d] : min[d] + extent[d])` in every dimension d; reads outside the
//     buffer's shape give 0 and writes outside it are dropped (tile ops only; element
//     loads/stores must be in bounds).
//   - Integer division and modulo truncate toward zero.
// The semantics below are the one both backends implement (the CPU interpreter and CUDA); each
// rule has a differential test (tests/codegen/DifferentialCases.h, docs/semantics.md):
//   - Tile ops touch exactly their regions: a region of a tile (`t.region(min, extent)`) reads
//     or writes those elements and no others, whatever scope the tile lives in (a register
//     fragment's other elements keep their values, the other side's elements are untouched).
//   - Out of bounds of a buffer's shape, tile ops read 0 and drop writes and atomics.
//   - Element accesses (Load, Store, AtomicAdd) must be in bounds; the interpreter reports a
//     user error naming the buffer, CUDA does not check. A guarded access (under if_then, or on
//     the side of a select that is not chosen) is never evaluated, so it may be out of bounds.
//   - Buffers have 1 to kMaxRank dimensions (tiles: 1 to 3), checked where the tensor is made.
//   - Shared memory written by one warp role and read by another (the warp-specialized
//     producer and the consumers on sm_90a) is ordered by the compiler: when it cannot order
//     such an access it does not warp-specialize (PlanPipeline.cpp says why in plan.reason).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tilepilot/error.h"
#include "tilepilot/expr.h"

namespace tp::ir {

/// The most dimensions a buffer may have (element access, copies, the interpreter's indices).
constexpr int kMaxRank = 8;

#define TILEPILOT_IR_EXPRS(X)                                                                      \
  X(IntImm)                                                                                        \
  X(FloatImm)                                                                                      \
  X(Variable)                                                                                      \
  X(Binary)                                                                                        \
  X(Call)                                                                                          \
  X(Select)                                                                                        \
  X(Cast)                                                                                          \
  X(Load)                                                                                          \
  X(Intrinsic)

#define TILEPILOT_IR_STMTS(X)                                                                      \
  X(Seq)                                                                                           \
  X(For)                                                                                           \
  X(Parallel)                                                                                      \
  X(IfThenElse)                                                                                    \
  X(Store)                                                                                         \
  X(Allocate)                                                                                      \
  X(Copy)                                                                                          \
  X(Gemm)                                                                                          \
  X(Fill)                                                                                          \
  X(Reduce)                                                                                        \
  X(AtomicAdd)                                                                                     \
  X(Print)                                                                                         \
  X(Let)                                                                                           \
  X(Evaluate)

enum class NodeKind : uint8_t {
#define TILEPILOT_X(n) n,
  TILEPILOT_IR_EXPRS(TILEPILOT_X) TILEPILOT_IR_STMTS(TILEPILOT_X)
#undef TILEPILOT_X
};
const char* node_kind_name(NodeKind k);

// ---------------------------------------------------------------------------------------------
// Buffers: global tensors (kernel parameters) and tiles.

enum class Scope : uint8_t {
  global,   // device memory; a kernel parameter
  shared,   // one copy per block
  fragment, // distributed over the block's threads (registers); element access only in parallel
  local,    // per thread, the same value in every thread outside `parallel`: on CUDA a
            // per-thread array, and every op that writes it (copy, fill, reduce, a parallel
            // loop that stores into it) runs all its elements in every thread
};
const char* scope_name(Scope s);

struct BufferNode {
  std::string name;
  uint64_t uid = 0;
  Scope scope = Scope::global;
  DType dtype = DType::f32;
  std::vector<Expr> shape; // tiles: integer immediates; tensors: immediates or Dims
  /// Global tensors only. Empty: contiguous row-major (element (i, j) of an [M, N] tensor at
  /// i * N + j). Otherwise one i32 Variable per dimension, outermost first, in elements, bound
  /// at launch from the argument's strides: element idx at sum(idx[d] * strides[d]).
  std::vector<Expr> strides;
  uint64_t kernel_uid = 0; // the kernel that allocated it (0 for tensors: any kernel)
  SourceLoc loc;

  int rank() const { return static_cast<int>(shape.size()); }
  /// The constant shape; an internal error when some extent is symbolic.
  std::vector<int64_t> const_shape() const;
  int64_t const_elements() const;
};
using Buffer = std::shared_ptr<const BufferNode>;
Buffer make_buffer(std::string name, Scope scope, DType dtype, std::vector<Expr> shape,
                   uint64_t kernel_uid, SourceLoc loc);

/// A box of a buffer. min and extent have the buffer's rank.
struct Region {
  Buffer buffer;
  std::vector<Expr> min;
  std::vector<int64_t> extent;

  /// The region's extents without its unit dimensions: a copy pairs the elements of two
  /// regions in row-major order of these (Copy says which pairs of extents a copy accepts).
  std::vector<int64_t> squeezed() const;
  int64_t elements() const;
};
/// The whole of a tile buffer.
Region whole(const Buffer& b);
/// Does r cover its whole tile buffer, from 0 to its constant extent? Never for a tensor: its
/// shape is symbolic.
bool is_whole(const Region& r);

// ---------------------------------------------------------------------------------------------
// Expressions.

struct ExprNode {
  NodeKind kind;
  DType dtype;
  ExprNode(NodeKind k, DType t) : kind(k), dtype(t) {}
  virtual ~ExprNode() = default;
};

template <typename T>
const T* as(const Expr& e) {
  return e.defined() && e->kind == T::node_kind ? static_cast<const T*>(e.get()) : nullptr;
}

struct IntImm : ExprNode {
  static constexpr NodeKind node_kind = NodeKind::IntImm;
  int64_t value;
  explicit IntImm(int64_t v, DType t = DType::i32) : ExprNode(node_kind, t), value(v) {}
  static Expr make(int64_t v);
};

struct FloatImm : ExprNode {
  static constexpr NodeKind node_kind = NodeKind::FloatImm;
  double value;
  FloatImm(double v, DType t) : ExprNode(node_kind, t), value(v) {}
  static Expr make(double v, DType t = DType::f32);
};

struct Variable : ExprNode {
  static constexpr NodeKind node_kind = NodeKind::Variable;
  std::string name;
  uint64_t uid;
  Variable(std::string n, uint64_t u, DType t)
      : ExprNode(node_kind, t), name(std::move(n)), uid(u) {}
  static Var make(const std::string& name, DType t = DType::i32);
};

/// Bit ops take integer operands and work on 32-bit two's complement values: shr is an
/// arithmetic shift (sign-filling), shl wraps, and a shift count is taken modulo 32.
// clang-format off
enum class BinOp : uint8_t {
  add, sub, mul, div, mod, min, max, bit_and, bit_xor, shl, shr, // arithmetic (bit ops: integers)
  eq, ne, lt, le, gt, ge, land, lor,                             // comparisons and logic: bool
  bit_or,                                                        // integers
};
// clang-format on
const char* binop_name(BinOp op); // the C++ spelling ("+", "<=") or function name ("min")
bool binop_is_compare(BinOp op);  // also land / lor: results are bool
bool binop_is_bitwise(BinOp op);
/// A bit op on integer values, with the 32-bit result the rule above gives.
int64_t bit_op32(BinOp op, int64_t a, int64_t b);

struct Binary : ExprNode {
  static constexpr NodeKind node_kind = NodeKind::Binary;
  BinOp op;
  Expr a, b;
  Binary(BinOp o, Expr x, Expr y, DType t)
      : ExprNode(node_kind, t), op(o), a(std::move(x)), b(std::move(y)) {}
  /// Promotes operands (any float -> f32, else i32; comparisons give bool) and folds constants.
  static Expr make(BinOp op, Expr a, Expr b);
};

/// Math on f32 (integer arguments convert). bit_not: integers only (~x). pow takes two
/// arguments, every other op one.
// clang-format off
enum class CallOp : uint8_t {
  neg, lnot, abs, exp, exp2, log, log2, sqrt, rsqrt, bit_not, tanh, erf, sigmoid, pow,
  bits_to_f32, f32_to_bits, // bitcast: the 32 bits of an i32 as f32, and back
};
// clang-format on
const char* callop_name(CallOp op);

struct Call : ExprNode {
  static constexpr NodeKind node_kind = NodeKind::Call;
  CallOp op;
  std::vector<Expr> args;
  Call(CallOp o, std::vector<Expr> a, DType t)
      : ExprNode(node_kind, t), op(o), args(std::move(a)) {}
  static Expr make(CallOp op, std::vector<Expr> args);
};

/// cond ? a : b, lazily: only the chosen side is evaluated (per element inside parallel), so
/// `select(i + 1 < n, A(i + 1), 0)` never reads A out of bounds.
struct Select : ExprNode {
  static constexpr NodeKind node_kind = NodeKind::Select;
  Expr cond, a, b;
  Select(Expr c, Expr x, Expr y, DType t)
      : ExprNode(node_kind, t), cond(std::move(c)), a(std::move(x)), b(std::move(y)) {}
  static Expr make(Expr c, Expr a, Expr b);
};

struct Cast : ExprNode {
  static constexpr NodeKind node_kind = NodeKind::Cast;
  Expr value;
  Cast(Expr v, DType t) : ExprNode(node_kind, t), value(std::move(v)) {}
  static Expr make(DType t, Expr v);
};

/// One element of a buffer. Its dtype is the buffer's; arithmetic promotes f16/bf16 to f32.
/// One index per dimension (any rank up to kMaxRank); out of bounds is an error (see above).
struct Load : ExprNode {
  static constexpr NodeKind node_kind = NodeKind::Load;
  Buffer buffer;
  std::vector<Expr> indices;
  Load(Buffer b, std::vector<Expr> i, DType t)
      : ExprNode(node_kind, t), buffer(std::move(b)), indices(std::move(i)) {}
  static Expr make(Buffer b, std::vector<Expr> indices);
};

/// A call of a device-library function or builtin, introduced by lowering for the CUDA backend
/// (e.g. "tp::sm90::wgmma_fence", "threadIdx.x"). `args` are printed in order; a Buffer argument
/// is passed by name through `buffers` (printed where the name "$k" appears in `name`'s text
/// form). The interpreter does not run lowered IR.
struct Intrinsic : ExprNode {
  static constexpr NodeKind node_kind = NodeKind::Intrinsic;
  std::string name;
  std::vector<Expr> args;
  std::vector<Buffer> buffers;
  bool pure = true; // no side effects: may be reordered or removed
  Intrinsic(std::string n, std::vector<Expr> a, std::vector<Buffer> b, DType t, bool p)
      : ExprNode(node_kind, t), name(std::move(n)), args(std::move(a)), buffers(std::move(b)),
        pure(p) {}
  static Expr make(std::string name, std::vector<Expr> args, DType t = DType::i32,
                   std::vector<Buffer> buffers = {}, bool pure = true);
};

/// The arithmetic type an operand of dtype t computes in: f16/bf16/fp8 -> f32, i8/u8/int4 -> i32.
DType compute_type(DType t);

// ---------------------------------------------------------------------------------------------
// Statements. Each carries the source location of the builder call that made it.

struct StmtNode {
  NodeKind kind;
  SourceLoc loc;
  StmtNode(NodeKind k, SourceLoc l) : kind(k), loc(std::move(l)) {}
  virtual ~StmtNode() = default;
};

class Stmt {
public:
  Stmt() = default;
  template <typename T>
  Stmt(std::shared_ptr<T> n) : node_(std::move(n)) {}
  bool defined() const { return node_ != nullptr; }
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  bool same_as(const Stmt& o) const { return node_ == o.node_; }

private:
  std::shared_ptr<const StmtNode> node_;
};

template <typename T>
const T* as(const Stmt& s) {
  return s.defined() && s->kind == T::node_kind ? static_cast<const T*>(s.get()) : nullptr;
}

struct Seq : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Seq;
  std::vector<Stmt> stmts;
  Seq(std::vector<Stmt> s, SourceLoc l) : StmtNode(node_kind, std::move(l)), stmts(std::move(s)) {}
  static Stmt make(std::vector<Stmt> stmts, SourceLoc loc = {});
};

enum class ForKind : uint8_t {
  serial,    // in order
  unrolled,  // in order; fully unrolled by the CUDA backend (constant extent)
  pipelined, // in order; copies of iteration i + stages - 1 overlap compute of iteration i
};
const char* for_kind_name(ForKind k);

/// The engine a pipelined loop's staged copies must use, as the kernel states it
/// (docs/schedules.md): automatic takes the best plan the loop and the target allow.
enum class CopyEngine : uint8_t { automatic, tma, cp_async };
const char* copy_engine_name(CopyEngine e);

/// A pipelined loop's schedule, stated by the kernel. The verifier checks what the loop's
/// structure must satisfy; the pipeline plan checks what the target must (PlanPipeline.h).
struct LoopSchedule {
  int stages = 1; // buffers per staged tile; 1 for serial and unrolled loops
  CopyEngine copies = CopyEngine::automatic;
  bool defer_last_gemm = false; // the loop's last gemm runs one iteration late
  bool pingpong = false;        // consumer warpgroups take turns at the loop's gemms
  bool operator==(const LoopSchedule&) const = default;
};

/// for var in [min, min + extent)
struct For : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::For;
  Var var;
  Expr min, extent;
  ForKind for_kind;
  LoopSchedule schedule; // pipelined only; the default otherwise
  Stmt body;
  For(Var v, Expr mn, Expr ext, ForKind k, LoopSchedule sc, Stmt b, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), var(std::move(v)), min(std::move(mn)),
        extent(std::move(ext)), for_kind(k), schedule(sc), body(std::move(b)) {}
  static Stmt make(Var v, Expr min, Expr extent, ForKind k, LoopSchedule schedule, Stmt body,
                   SourceLoc loc);
};

/// Element-wise loop nest over a tile-shaped index space: every (vars) in [0, extents) runs the
/// body once, in no particular order and possibly at once; iterations must be independent.
struct Parallel : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Parallel;
  std::vector<Var> vars;
  std::vector<int64_t> extents;
  Stmt body;
  Parallel(std::vector<Var> v, std::vector<int64_t> e, Stmt b, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), vars(std::move(v)), extents(std::move(e)),
        body(std::move(b)) {}
  static Stmt make(std::vector<Var> vars, std::vector<int64_t> extents, Stmt body, SourceLoc loc);
};

struct IfThenElse : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::IfThenElse;
  Expr cond;
  Stmt then_case, else_case; // else_case may be undefined
  IfThenElse(Expr c, Stmt t, Stmt e, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), cond(std::move(c)), then_case(std::move(t)),
        else_case(std::move(e)) {}
  static Stmt make(Expr c, Stmt t, Stmt e, SourceLoc loc);
};

/// buffer[indices] = value (rounded to the buffer's dtype). Indices must be in bounds (any rank
/// up to kMaxRank). A store to a local tile inside `parallel` on CUDA runs in every thread.
struct Store : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Store;
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
  Store(Buffer b, std::vector<Expr> i, Expr v, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), buffer(std::move(b)), indices(std::move(i)),
        value(std::move(v)) {}
  static Stmt make(Buffer b, std::vector<Expr> indices, Expr value, SourceLoc loc);
};

/// Declares a tile; it lives until the end of the enclosing Seq. Contents start undefined.
struct Allocate : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Allocate;
  Buffer buffer;
  Allocate(Buffer b, SourceLoc l) : StmtNode(node_kind, std::move(l)), buffer(std::move(b)) {}
  static Stmt make(Buffer b, SourceLoc loc);
};

/// dst = src, element by element in row-major order of the squeezed extents, converting dtype:
/// the n-th element of src goes to the n-th element of dst. The squeezed extents are equal (a
/// [1, 1, 64, 128] box of a 4-d tensor and a [64, 128] tile), or they hold the same number of
/// elements and end in the same innermost extent, so each row of one side is a row of the
/// other and only the outer dimensions are regrouped: a [1, 2, 64, 32] box and a [128, 32] tile
/// (tile row r holds the box's [0, r / 64, r % 64, :]). ir/CopyShape.h maps coordinates.
/// Out-of-bounds reads give 0, out-of-bounds writes are dropped (a box may start at negative
/// coordinates). Exactly the two regions are read and written: copying a region of a register
/// fragment writes only the region's elements to dst (and copying into a fragment region leaves
/// its other elements as they were).
struct Copy : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Copy;
  Region src, dst;
  Copy(Region s, Region d, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), src(std::move(s)), dst(std::move(d)) {}
  static Stmt make(Region src, Region dst, SourceLoc loc);
};

/// c (+)= op(a) * op(b), op = transpose when trans_*; products accumulate in c's dtype (f32).
/// a is [M, K] ([K, M] when trans_a), b is [K, N] ([N, K] when trans_b), c is [M, N].
/// Out-of-bounds operand elements read 0 and out-of-bounds c elements are not written. Float
/// sums are computed in a different order per backend: results agree to a tolerance.
struct Gemm : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Gemm;
  Region a, b, c;
  bool trans_a, trans_b, clear;
  Gemm(Region x, Region y, Region z, bool ta, bool tb, bool cl, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), a(std::move(x)), b(std::move(y)), c(std::move(z)),
        trans_a(ta), trans_b(tb), clear(cl) {}
  static Stmt make(Region a, Region b, Region c, bool trans_a, bool trans_b, bool clear,
                   SourceLoc loc);
};

/// Every element of dst (in bounds) = value; elements of dst's buffer outside the region keep
/// their values (also for a region of a register fragment).
struct Fill : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Fill;
  Region dst;
  Expr value;
  Fill(Region d, Expr v, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), dst(std::move(d)), value(std::move(v)) {}
  static Stmt make(Region dst, Expr value, SourceLoc loc);
};

enum class ReduceOp : uint8_t { max, min, sum, absmax };
const char* reduce_op_name(ReduceOp op);

/// dst = reduce(src along dim), dst's shape is src's without dim. Without clear, the result is
/// combined with dst's previous contents. Whole buffers only; sums run in f32 on CUDA (in
/// double on the interpreter, rounded at the store), so float results agree to a tolerance.
struct Reduce : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Reduce;
  ReduceOp op;
  Buffer src, dst;
  int dim;
  bool clear;
  Reduce(ReduceOp o, Buffer s, Buffer d, int dm, bool cl, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), op(o), src(std::move(s)), dst(std::move(d)), dim(dm),
        clear(cl) {}
  static Stmt make(ReduceOp op, Buffer src, Buffer dst, int dim, bool clear, SourceLoc loc);
};

/// buffer[indices] += value, atomically with respect to other blocks. The indices must be in
/// bounds. The tile form atomic_add(dst box, tile) is sugar: a parallel loop of these, each
/// under a bounds guard, so out-of-bounds elements of the global side are dropped.
struct AtomicAdd : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::AtomicAdd;
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
  AtomicAdd(Buffer b, std::vector<Expr> i, Expr v, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), buffer(std::move(b)), indices(std::move(i)),
        value(std::move(v)) {}
  static Stmt make(Buffer b, std::vector<Expr> indices, Expr value, SourceLoc loc);
};

/// Debug print: a scalar value (printed once per block) or a whole tile (tile set).
struct Print : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Print;
  std::string label;
  Expr value;
  Buffer tile;
  Print(std::string s, Expr v, Buffer t, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), label(std::move(s)), value(std::move(v)),
        tile(std::move(t)) {}
  static Stmt make(std::string label, Expr value, Buffer tile, SourceLoc loc);
};

/// let var = value in body (value evaluated once). The builder always gives a body (the rest of
/// the enclosing scope). The CUDA lowering flattens those into the enclosing Seq (Lower.cpp):
/// a Let with an undefined body binds var for the statements after it in its Seq.
struct Let : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Let;
  Var var;
  Expr value;
  Stmt body;
  Let(Var v, Expr x, Stmt b, SourceLoc l)
      : StmtNode(node_kind, std::move(l)), var(std::move(v)), value(std::move(x)),
        body(std::move(b)) {}
  static Stmt make(Var v, Expr value, Stmt body, SourceLoc loc = {});
};

/// Evaluates an expression for its side effects (a device-library call).
struct Evaluate : StmtNode {
  static constexpr NodeKind node_kind = NodeKind::Evaluate;
  Expr value;
  Evaluate(Expr v, SourceLoc l) : StmtNode(node_kind, std::move(l)), value(std::move(v)) {}
  static Stmt make(Expr v, SourceLoc loc = {});
};

// ---------------------------------------------------------------------------------------------
// A kernel: a grid of blocks, each running `body` with its block indices bound.

/// One launch argument: tensor params[index] or scalar scalars[index].
struct ParamRef {
  bool scalar = false;
  int index = 0;
};

struct KernelNode {
  std::string name;
  uint64_t uid = 0;
  std::vector<Buffer> params; // global tensors, in launch order among the tensors
  std::vector<Var> scalars;   // scalar parameters (f32/i32, passed by value), in launch order
  /// Tensors and scalars interleaved in launch order; empty means the tensors alone.
  std::vector<ParamRef> order;
  std::vector<Var> dims;  // symbolic sizes, each bound by some parameter's shape
  std::vector<Expr> grid; // 1 to 3 extents (x, y, z)
  std::vector<Var> block_vars;
  int threads = 128;
  int64_t smem_limit = 0; // bytes; 0 = the target's
  int blocks_per_sm = 1;  // KernelOptions::blocks_per_sm
  Stmt body;
  std::map<std::string, std::string> attrs; // annotations (rasterization, hints)
  SourceLoc loc;

  /// The launch order (order, or the tensors alone when it is empty).
  std::vector<ParamRef> launch_order() const;
  /// Does some tensor parameter have symbolic strides?
  bool has_strided() const;
};

} // namespace tp::ir
