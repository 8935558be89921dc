// Tensors, tiles and element references: the values kernel bodies index into.
#include "lang/Builder.h"
#include "tilepilot/lang.h"

namespace tp {

using lang::to_loc;

namespace {

void check_indices(const ir::Buffer& b, const std::vector<Expr>& idx, const char* what,
                   const SourceLoc& loc) {
  if (static_cast<int>(idx.size()) != b->rank())
    user_error(loc) << what << " of '" << b->name << "': " << idx.size() << " indices for a "
                    << b->rank() << "-d " << ir::scope_name(b->scope)
                    << (b->scope == ir::Scope::global ? " tensor" : " tile")
                    << "; give one index per dimension";
  for (size_t d = 0; d < idx.size(); ++d)
    if (!idx[d].defined() || !is_int(idx[d].dtype()))
      user_error(loc) << what << " of '" << b->name << "': index " << d
                      << " is not an integer expression (it is "
                      << (idx[d].defined() ? dtype_name(idx[d].dtype()) : "undefined")
                      << "); tile and element indices must be integers: use cast(i32, ...)";
}

} // namespace

ElemRef::ElemRef(std::shared_ptr<const ir::BufferNode> b, std::vector<Expr> idx, Loc l)
    : buffer(std::move(b)), indices(std::move(idx)), loc(l) {
  SourceLoc sl = to_loc(loc);
  lang::KernelBuilder& kb = lang::current("element access", sl);
  lang::check_owner(buffer, "element access", sl);
  check_indices(buffer, indices, "element access", sl);
  if (buffer->scope == ir::Scope::fragment && kb.parallel_depth == 0)
    user_error(sl) << "fragment '" << buffer->name
                   << "' indexed outside parallel: a fragment is spread over the block's "
                      "threads, so its elements can only be accessed inside parallel(...)";
}

ElemRef::operator Expr() const { return ir::Load::make(buffer, indices); }

ElemRef& ElemRef::operator=(const Expr& v) {
  SourceLoc sl = to_loc(loc);
  if (!v.defined()) user_error(sl) << "store to '" << buffer->name << "': undefined value";
  lang::append(ir::Store::make(buffer, indices, v, sl));
  return *this;
}
ElemRef& ElemRef::operator+=(const Expr& v) { return *this = Expr(*this) + v; }
ElemRef& ElemRef::operator-=(const Expr& v) { return *this = Expr(*this) - v; }
ElemRef& ElemRef::operator*=(const Expr& v) { return *this = Expr(*this) * v; }

Tensor::Tensor(const std::string& name, std::vector<Expr> shape, DType dtype, Loc l) {
  SourceLoc loc = to_loc(l);
  if (shape.empty()) user_error(loc) << "tensor '" << name << "' has no dimensions";
  if (shape.size() > static_cast<size_t>(ir::kMaxRank))
    user_error(loc) << "tensor '" << name << "' has " << shape.size()
                    << " dimensions; tensors have at most " << ir::kMaxRank
                    << " (merge dimensions that are contiguous)";
  for (const Expr& e : shape) {
    bool ok = e.defined() && (e.as_int() ? *e.as_int() > 0 : ir::as<ir::Variable>(e) != nullptr);
    if (!ok)
      user_error(loc) << "tensor '" << name
                      << "': each extent must be a positive integer or a Dim";
  }
  if (dtype == DType::boolean)
    user_error(loc) << "tensor '" << name << "': bool tensors are not supported; use i32";
  buffer_ = ir::make_buffer(name, ir::Scope::global, dtype, std::move(shape), 0, loc);
}

Tensor::Tensor(const std::string& name, std::vector<Expr> shape, DType dtype, Strided, Loc l)
    : Tensor(name, std::move(shape), dtype, l) {
  // One stride variable per dimension; the launch binds them (ArgBinding.cpp).
  auto b = std::make_shared<ir::BufferNode>(*buffer_);
  for (int d = 0; d < b->rank(); ++d)
    b->strides.push_back(Var(name + "_stride" + std::to_string(d), i32));
  buffer_ = std::move(b);
}

const std::string& Tensor::name() const { return buffer_->name; }
DType Tensor::dtype() const { return buffer_->dtype; }
bool Tensor::is_strided() const {
  return !buffer_->strides.empty();
}

Scalar::Scalar(const std::string& name, DType t, Loc l) : Var(name, t) {
  if (t != DType::f32 && t != DType::i32)
    user_error(to_loc(l)) << "scalar '" << name << "' is " << dtype_name(t)
                          << "; scalar kernel parameters are f32 or i32";
}

ElemRef Tensor::elem(std::vector<Expr> idx, Loc loc) const {
  return ElemRef(buffer_, std::move(idx), loc);
}

TileRef Tensor::tile(std::vector<Expr> min, Loc loc) const {
  SourceLoc sl = to_loc(loc);
  check_indices(buffer_, min, "tile", sl);
  return TileRef{buffer_, std::move(min), {}, loc};
}

TileRef Tensor::tile(std::vector<Expr> min, std::vector<int64_t> extent, Loc loc) const {
  SourceLoc sl = to_loc(loc);
  check_indices(buffer_, min, "tile", sl);
  if (extent.size() != min.size())
    user_error(sl) << "tile of '" << buffer_->name << "': " << min.size() << " offsets but "
                   << extent.size() << " extents";
  for (int64_t e : extent)
    if (e <= 0) user_error(sl) << "tile of '" << buffer_->name << "': extents must be positive";
  return TileRef{buffer_, std::move(min), std::move(extent), loc};
}

ElemRef Tile::elem(std::vector<Expr> idx, Loc loc) const {
  return ElemRef(buffer_, std::move(idx), loc);
}

TileRef Tile::region(std::vector<Expr> min, std::vector<int64_t> extent, Loc loc) const {
  SourceLoc sl = to_loc(loc);
  check_indices(buffer_, min, "region", sl);
  if (extent.size() != min.size())
    user_error(sl) << "region of '" << buffer_->name << "': " << min.size() << " offsets but "
                   << extent.size() << " extents";
  return TileRef{buffer_, std::move(min), std::move(extent), loc};
}

std::vector<int64_t> Tile::shape() const { return buffer_->const_shape(); }
DType Tile::dtype() const { return buffer_->dtype; }

} // namespace tp
