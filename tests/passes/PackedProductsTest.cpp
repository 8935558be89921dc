// Packed products (PackedProducts.cpp): a run of 16-bit shared writes whose values are small
// integers, exact 16-bit values or their products is computed two at a time in the tile's own
// packed arithmetic. Checked on the lowered statements: which runs become packed words, with
// which helpers and constants, and which keep the f32 values and their conversions, for the
// value forms that pack and the ones that must not (a rounding the packed form would not make).
#include <gtest/gtest.h>

#include <cmath>

#include <tilepilot/tilepilot.h>

#include "LoweredBody.h"
#include "ir/IRVisitor.h"
#include "passes/PackedProducts.h"

using namespace tp;

namespace {

enum class Value {
  int4_bf16,           // (code - 8) * scale into bf16: an int4 GEMM's unpacking
  int4_f16,            // the same into f16 with f16 scales
  scale_first,         // scale * (code - 8)
  added_offset,        // bitcast(...) + (-(2^23 + 8)): the same integer, written with +
  codes_only,          // cast(f32, code): a small integer alone
  straddling,          // ((w >> (4i + 2)) & 15 - 8) * scale: odd rows' fields cross a byte
  exact_copy,          // a bf16 value alone
  wide_mask_bf16,      // (w & 255) - 8 into bf16: 255 does not fit below bf16's base of 128
  wide_mask_f16,       // the same into f16: it fits below 1024
  two_scales,          // scale * scale: the f32 product is not exact
  scale_of_other_type, // an f16 scale into a bf16 tile
  plus_one,            // (code - 8) * scale + 1: a sum rounds
};

/// bitcast(f32, e | 0x4B000000) - (2^23 + 8): the integer e - 8.
Expr centred(const Expr& e) {
  return bitcast(f32, e | 0x4B000000) - 8388616.0f;
}

Kernel kernel_of(Value v) {
  const bool f16_tile = v == Value::int4_f16 || v == Value::wide_mask_f16;
  const DType tile = f16_tile ? f16 : bf16;
  Dim R("R"), N("N");
  Tensor W("W", {R, N}, i32), S("S", {N}, bf16), H("H", {N}, f16), Y("Y", {R, N}, tile);
  return kernel("packed", {W, S, H, Y}, grid(ceildiv(N, 64), ceildiv(R, 2)), threads(128),
                [&](Var bx, Var by) {
                  Tile t = alloc_shared({16, 64}, tile);
                  parallel({2, 64}, [&](Var r, Var j) {
                    Var w = let("w", W(by * 2 + r, bx * 64 + j));
                    Var s = let("s", cast(f32, (f16_tile ? H : S)(bx * 64 + j)));
                    Var h = let("h", cast(f32, H(bx * 64 + j)));
                    for (int i = 0; i < 8; ++i) {
                      Expr code = (w >> (4 * i)) & 15;
                      Expr out;
                      switch (v) {
                      case Value::scale_first:
                        out = s * centred(code);
                        break;
                      case Value::added_offset:
                        out = (bitcast(f32, code | 0x4B000000) + (-8388616.0f)) * s;
                        break;
                      case Value::codes_only:
                        out = cast(f32, code);
                        break;
                      case Value::straddling:
                        out = centred((w >> (4 * i + 2)) & 15) * s;
                        break;
                      case Value::exact_copy:
                        out = s;
                        break;
                      case Value::wide_mask_bf16:
                      case Value::wide_mask_f16:
                        out = centred((w >> (4 * i)) & 255) * s;
                        break;
                      case Value::two_scales:
                        out = s * s;
                        break;
                      case Value::scale_of_other_type:
                        out = centred(code) * h;
                        break;
                      case Value::plus_one:
                        out = centred(code) * s + 1.0f;
                        break;
                      default:
                        out = centred(code) * s;
                      }
                      t(r * 8 + i, j) = out;
                    }
                  });
                  copy(t, Y.tile(by * 16, bx * 64));
                });
}

/// What the runs of the loop became: packed word stores and their helpers, or f32 runs.
struct Lowered {
  int packed_runs = 0, f32_runs = 0;
  std::map<std::string, int> helpers; // name -> uses inside packed stores
  std::vector<std::string> notes;
};

struct Helpers : ir::IRVisitor {
  std::map<std::string, int>* names;
  using ir::IRVisitor::visit;
  void visit(const ir::Intrinsic* op) override {
    ++(*names)[op->name];
    ir::IRVisitor::visit(op);
  }
};

Lowered lower(Value v) {
  Lowered out;
  Kernel k = kernel_of(v);
  ir::for_each_stmt(
      tp::testing::lowered_body(k, passes::Target::parse("sm_90a"), nullptr, &out.notes),
      [&](const ir::Stmt& st) {
        const auto* e = ir::as<ir::Evaluate>(st);
        const auto* c = e ? ir::as<ir::Intrinsic>(e->value) : nullptr;
        if (!c) return;
        if (c->name == "tp::cg::store_words") {
          ++out.packed_runs;
          Helpers h;
          h.names = &out.helpers;
          for (const Expr& a : c->args)
            h.visit(a);
        }
        out.f32_runs +=
            c->name.rfind("tp::cg::store", 0) == 0 && c->name.find("_aligned") != std::string::npos;
      });
  return out;
}

int uses(const Lowered& l, const std::string& prefix) {
  int n = 0;
  for (const auto& [name, count] : l.helpers)
    n += name.rfind(prefix, 0) == 0 ? count : 0;
  return n;
}

bool has(const std::vector<std::string>& notes, const std::string& part) {
  for (const std::string& n : notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

} // namespace

// Eight code rows, each a run of 8 columns: 8 packed runs of 4 words, each word the product of
// two codes minus 8 and two scales. The codes are 4-bit fields of the words, row i's at bit 4i:
// gathered by byte.
TEST(PackedProducts, UnpackingIsPackedProducts) {
  for (Value v : {Value::int4_bf16, Value::scale_first, Value::added_offset}) {
    Lowered l = lower(v);
    EXPECT_EQ(l.packed_runs, 8);
    EXPECT_EQ(l.f32_runs, 0);
    EXPECT_EQ(l.helpers["tp::cg::mul2<tp::bf16>"], 32);
    EXPECT_EQ(uses(l, "tp::cg::small_fields2<tp::bf16, 8, "), 32);
    EXPECT_EQ(l.helpers["tp::cg::small_fields2<tp::bf16, 8, 0, 15>"], 4);
    EXPECT_EQ(l.helpers["tp::cg::small_fields2<tp::bf16, 8, 28, 15>"], 4);
    EXPECT_EQ(uses(l, "tp::cg::small_ints2"), 0);
    EXPECT_EQ(l.helpers["tp::cg::exact2<tp::bf16>"], 32);
    EXPECT_TRUE(has(l.notes, "8 of 8 run(s) computed as packed 16-bit products"))
        << ::testing::PrintToString(l.notes);
  }
}

TEST(PackedProducts, HalfTilesUseHalfArithmetic) {
  Lowered l = lower(Value::int4_f16);
  EXPECT_EQ(l.packed_runs, 8);
  EXPECT_EQ(l.helpers["tp::cg::mul2<tp::half>"], 32);
  EXPECT_EQ(uses(l, "tp::cg::small_fields2<tp::half, 8, "), 32);
}

TEST(PackedProducts, SmallIntegersAndExactValuesAlonePack) {
  Lowered codes = lower(Value::codes_only);
  EXPECT_EQ(codes.packed_runs, 8);
  EXPECT_EQ(uses(codes, "tp::cg::small_fields2<tp::bf16, 0, "), 32);
  EXPECT_EQ(codes.helpers.count("tp::cg::mul2<tp::bf16>"), 0u);
  Lowered copy = lower(Value::exact_copy);
  EXPECT_EQ(copy.packed_runs, 8);
  EXPECT_EQ(copy.helpers["tp::cg::exact2<tp::bf16>"], 32);
  EXPECT_EQ(copy.helpers.count("tp::cg::mul2<tp::bf16>"), 0u);
}

// A field that crosses a byte boundary is not gathered by byte: its pair is two masked values,
// still packed exactly.
TEST(PackedProducts, FieldsAcrossBytesPackAsIntegers) {
  Lowered l = lower(Value::straddling);
  EXPECT_EQ(l.packed_runs, 8);
  EXPECT_EQ(uses(l, "tp::cg::small_fields2<tp::bf16, 8, "), 16); // bits 2, 10, 18, 26
  EXPECT_EQ(l.helpers["tp::cg::small_fields2<tp::bf16, 8, 10, 15>"], 4);
  EXPECT_EQ(l.helpers["tp::cg::small_ints2<tp::bf16, 8>"], 16); // bits 6, 14, 22, 30
}

// 255 + 128 does not fit bf16's 8 significant bits exactly; it fits f16's 11.
TEST(PackedProducts, IntegersMustFitBelowTheTypesBase) {
  Lowered b = lower(Value::wide_mask_bf16);
  EXPECT_EQ(b.packed_runs, 0);
  EXPECT_EQ(b.f32_runs, 8);
  Lowered h = lower(Value::wide_mask_f16);
  EXPECT_EQ(h.packed_runs, 8);
}

// Each of these rounds somewhere the packed form would not, or rounds twice: they keep the f32
// value and one conversion per pair.
TEST(PackedProducts, ValuesThatRoundOtherwiseKeepF32) {
  for (Value v : {Value::two_scales, Value::scale_of_other_type, Value::plus_one}) {
    Lowered l = lower(v);
    EXPECT_EQ(l.packed_runs, 0);
    EXPECT_EQ(l.f32_runs, 8);
    EXPECT_FALSE(has(l.notes, "packed 16-bit products")) << ::testing::PrintToString(l.notes);
  }
}

// The premise of the packed form: a small integer (|v| up to 2^p, p the type's significand bits)
// times any finite value of the type is exact in f32, so rounding that f32 product once gives
// what fma.rn gives from the exact product. Every bf16 and f16 bit pattern, against every
// integer the pass lets through for bf16 and every 7th (and the ends) for f16.
TEST(PackedProducts, TheF32ProductOfASmallIntegerAndAValueIsExact) {
  for (DType t : {bf16, f16}) {
    HostTensor all(t, {65536});
    auto* bits = static_cast<uint16_t*>(all.data());
    for (int k = 0; k < 65536; ++k)
      bits[k] = static_cast<uint16_t>(k);
    // The pass's own limit: widening it past what stays exact fails here.
    const int limit = static_cast<int>(passes::packed_integer_limit(t)), step = t == bf16 ? 1 : 7;
    int64_t inexact = 0, checked = 0;
    for (int v = -limit; v <= limit; v = (v + step > limit && v < limit) ? limit : v + step)
      for (int k = 0; k < 65536; ++k) {
        const double s = all.get(k);
        if (!std::isfinite(s)) continue;
        const float p = static_cast<float>(v) * static_cast<float>(s);
        inexact += std::isfinite(p) && static_cast<double>(p) != double(v) * s;
        ++checked;
      }
    EXPECT_EQ(inexact, 0) << dtype_name(t);
    EXPECT_GT(checked, 1000000);
  }
}
