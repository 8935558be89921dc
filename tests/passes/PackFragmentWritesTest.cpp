// Packed fragment writes (PackFragmentWrites.cpp): a parallel loop that computes a 16-bit gemm
// A operand in registers from packed 4-bit codes writes each pair of adjacent columns from one
// packed word, and keeps the element writes where a value is not a packed product. Checked on
// the lowered statements: the packed words and element writes of the fragment, and the note.
#include <gtest/gtest.h>

#include <tilepilot/tilepilot.h>

#include "LoweredBody.h"
#include "ir/IRVisitor.h"

using namespace tp;

namespace {

enum class Value { codes_times_scale, codes, exp_of_codes };

/// C^T = dequant(W)^T A^T over one 64 x 64 tile: the weights' codes (W i32, 8 per word along
/// K) unpacked into the A fragment Wt [64, 64] in `dt`, A's 16 rows the shared B operand.
Kernel operand_kernel(Value v, DType dt = bf16) {
  Dim M("M"), N("N"), K("K"), KW("KW");
  Tensor A("A", {M, K}, dt), W("W", {KW, N}, i32), S("S", {N}, dt), C("C", {N, M}, f32);
  return kernel("operand", {A, W, S, C}, grid(ceildiv(N, 64)), threads(128), [&](Var bx) {
    Tile As = alloc_shared({16, 64}, dt), Ws = alloc_shared({8, 64}, i32);
    Tile Wt = alloc_fragment({64, 64}, dt), acc = alloc_fragment({64, 16}, f32);
    clear(acc);
    copy(A.tile(0, 0), As);
    copy(W.tile(0, bx * 64), Ws);
    parallel({64, 64}, [&](Var j, Var kk) {
      Expr code = (Ws(kk / 8, j) >> ((kk % 8) * 4)) & 15;
      Expr centred = bitcast(f32, code | 0x4B000000) - 8388616.0f;
      switch (v) {
      case Value::codes_times_scale:
        Wt(j, kk) = centred * cast(f32, S(bx * 64 + j));
        break;
      case Value::codes:
        Wt(j, kk) = centred;
        break;
      case Value::exp_of_codes:
        Wt(j, kk) = exp(centred);
        break;
      }
    });
    gemm(Wt, As, acc, {.trans_b = true});
    copy(acc, C.tile(bx * 64, 0));
  });
}

struct Writes {
  int words = 0;    // packed words (tp::cg::low_half stores)
  int elements = 0; // other stores into the fragment's registers
  std::vector<std::string> notes;
};

Writes lower(const Kernel& k) {
  Writes out;
  ir::Stmt body =
      tp::testing::lowered_body(k, passes::Target::parse("sm_90a"), nullptr, &out.notes);
  ir::for_each_stmt(body, [&](const ir::Stmt& st) {
    const auto* s = ir::as<ir::Store>(st);
    if (!s || s->buffer->scope != ir::Scope::local || s->buffer->dtype != k.node().params[0]->dtype)
      return;
    const auto* c = ir::as<ir::Intrinsic>(s->value);
    if (c && c->name.rfind("tp::cg::low_half", 0) == 0)
      ++out.words;
    else if (!c || c->name.rfind("tp::cg::high_half", 0) != 0)
      ++out.elements;
  });
  return out;
}

bool has(const std::vector<std::string>& notes, const std::string& part) {
  for (const std::string& n : notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(PackFragmentWrites, CodesTimesScalesArePackedAPairAWord) {
  for (DType dt : {bf16, f16}) {
    Writes w = lower(operand_kernel(Value::codes_times_scale, dt));
    EXPECT_EQ(w.words, 1) << dtype_name(dt); // one packed word in the loop over register pairs
    EXPECT_EQ(w.elements, 0) << dtype_name(dt);
    EXPECT_TRUE(has(w.notes, "register writes packed")) << dtype_name(dt);
  }
  Writes w = lower(operand_kernel(Value::codes));
  EXPECT_EQ(w.words, 1);
  EXPECT_EQ(w.elements, 0);
}

// Values that are not packed products keep the element writes, with the reason in the note.
TEST(PackFragmentWrites, OtherValuesKeepTheirElementWrites) {
  Writes w = lower(operand_kernel(Value::exp_of_codes));
  EXPECT_EQ(w.words, 0);
  EXPECT_EQ(w.elements, 1);
  EXPECT_TRUE(has(w.notes, "not packed: the values are not packed products"));
}

} // namespace
