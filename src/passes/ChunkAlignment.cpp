// Alignment conditions of copies between global tensors and tiles (see ChunkAlignment.h).
#include "passes/ChunkAlignment.h"

namespace tp::passes {

std::optional<bool> known(const Expr& e) {
  if (const auto* i = ir::as<ir::IntImm>(e)) return i->value != 0;
  return std::nullopt;
}

Expr conj(const Expr& a, const Expr& b) {
  if (!a.defined()) return b;
  if (std::optional<bool> k = known(a)) return *k ? b : a;
  if (std::optional<bool> k = known(b)) return *k ? a : b;
  return a && b;
}

Expr chunks_aligned(const ir::Buffer& g, const Expr& col0, const Expr& col1) {
  const int64_t per = 16 / dtype_bytes(g->dtype);
  Expr ok = conj(col0 % per == 0, col1 % per == 0);
  if (!g->strides.empty()) {
    ok = conj(ok, g->strides.back() == 1);
    for (int d = 0; d + 1 < g->rank(); ++d)
      ok = conj(ok, g->strides[d] % per == 0);
  } else if (g->rank() >= 2) {
    ok = conj(ok, g->shape.back() % per == 0);
  }
  return ok;
}

} // namespace tp::passes
