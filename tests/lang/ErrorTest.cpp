// Invalid kernels are user errors that carry the builder's source location and name the
// buffer, the op and the rule. Each test checks the message, not only that something threw.
#include <gtest/gtest.h>

#include "tilepilot/tilepilot.h"

using namespace tp;

namespace {

/// Runs `f`, expects a UserError whose message contains every fragment and this file's name.
template <typename F>
void expect_user_error(F f, std::vector<std::string> fragments) {
  try {
    f();
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("ErrorTest.cpp:"), std::string::npos) << "no source location: " << msg;
    for (const auto& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "missing '" << frag << "' in: " << msg;
    return;
  }
  ADD_FAILURE() << "expected a user error";
}

struct Fixture {
  Dim M{"M"}, N{"N"}, K{"K"};
  Tensor A{"A", {M, K}, bf16}, B{"B", {K, N}, bf16}, C{"C", {M, N}, bf16};
};

} // namespace

TEST(LangErrors, CopyShapeMismatch) {
  Fixture f;
  expect_user_error(
      [&] {
        kernel("k", {f.A, f.C}, grid(1), threads(128), [&](Var) {
          Tile s = alloc_shared({64, 32}, bf16);
          Tile r = alloc_fragment({64, 64}, f32);
          copy(s, r);
        });
      },
      {"copy: shape mismatch", "[64, 32]", "[64, 64]"});
}

// A box whose outer dimensions regroup into the tile's rows is a copy (the rule flattens them
// row-major); boxes whose rows differ from the tile's, or whose element count differs, are not:
// the message names both boxes and the rule's two forms.
TEST(LangErrors, CopyRegroupNeedsSameRowsAndCount) {
  Dim Nb("Nb");
  Tensor X("X", {Nb, 16, 16, 64}, bf16), Y("Y", {Nb, 16}, bf16);
  kernel("k", {X, Y}, grid(1), threads(128), [&](Var) {
    Tile s = alloc_shared({32, 64}, bf16);
    copy(X.tile({0, -1, -1, 0}, {1, 2, 16, 64}), s); // [2, 16, 64] -> [32, 64]: accepted
  });
  const std::vector<std::string> rule = {"copy: shape mismatch",
                                         "'X' box",
                                         "'shared0' box",
                                         "same number of elements",
                                         "the same innermost extent",
                                         "flattened row-major"};
  auto with = [&](std::vector<std::string> v) {
    v.insert(v.end(), rule.begin(), rule.end());
    return v;
  };
  expect_user_error( // rows of 32 channels into rows of 64: not a regrouping of whole rows
      [&] {
        kernel("k", {X, Y}, grid(1), threads(128), [&](Var) {
          Tile s = alloc_shared({32, 64}, bf16);
          copy(X.tile({0, 0, 0, 0}, {1, 4, 16, 32}), s);
        });
      },
      with({"[1, 4, 16, 32]", "[32, 64]"}));
  expect_user_error( // 48 rows into 32
      [&] {
        kernel("k", {X, Y}, grid(1), threads(128), [&](Var) {
          Tile s = alloc_shared({32, 64}, bf16);
          copy(X.tile({0, 0, 0, 0}, {1, 3, 16, 64}), s);
        });
      },
      with({"[1, 3, 16, 64]", "[32, 64]"}));
}

TEST(LangErrors, GemmShapeMismatch) {
  Fixture f;
  expect_user_error(
      [&] {
        kernel("k", {f.A}, grid(1), threads(128), [&](Var) {
          Tile a = alloc_shared({64, 32}, bf16), b = alloc_shared({64, 64}, bf16);
          Tile c = alloc_fragment({64, 64}, f32);
          gemm(a, b, c);
        });
      },
      {"gemm: shape mismatch", "op(A) is [64, 32]", "op(B) is [64, 64]"});
}

TEST(LangErrors, GemmOperandInWrongScope) {
  Fixture f;
  expect_user_error(
      [&] {
        kernel("k", {f.A}, grid(1), threads(128), [&](Var) {
          Tile a = alloc_shared({64, 32}, bf16), b = alloc_shared({32, 64}, bf16);
          Tile c = alloc_shared({64, 64}, f32);
          gemm(a, b, c);
        });
      },
      {"gemm: operand C", "is a shared tile", "C must be a fragment"});
}

TEST(LangErrors, ReduceAlongMissingDim) {
  Fixture f;
  expect_user_error(
      [&] {
        kernel("k", {f.A}, grid(1), threads(128), [&](Var) {
          Tile s = alloc_fragment({64, 32}, f32), m = alloc_fragment({64}, f32);
          reduce_max(s, m, 2);
        });
      },
      {"reduce along a missing dim", "2-d", "got 2"});
}

TEST(LangErrors, FragmentIndexedOutsideParallel) {
  Fixture f;
  expect_user_error(
      [&] {
        kernel("k", {f.A}, grid(1), threads(128), [&](Var) {
          Tile s = alloc_fragment({64, 32}, f32);
          s(0, 0) = 1.0f;
        });
      },
      {"fragment", "indexed outside parallel"});
}

TEST(LangErrors, TileUsedOutsideItsKernel) {
  Fixture f;
  std::optional<Tile> leaked;
  kernel("first", {f.A}, grid(1), threads(128), [&](Var) {
    leaked = alloc_shared({16, 16}, bf16);
  });
  expect_user_error(
      [&] {
        kernel("second", {f.A}, grid(1), threads(128),
               [&](Var bx) { copy(f.A.tile(bx * 16, 0), *leaked); });
      },
      {"belongs to another kernel", "copy"});
}

TEST(LangErrors, TileOpOutsideAnyKernel) {
  Fixture f;
  expect_user_error(
      [&] {
        alloc_shared({16, 16}, bf16);
      },
      {"alloc_shared called outside a kernel"});
}

TEST(LangErrors, DtypeUnsupportedByGemm) {
  Fixture f;
  expect_user_error(
      [&] {
        kernel("k", {f.A}, grid(1), threads(128), [&](Var) {
          Tile a = alloc_shared({64, 32}, i32), b = alloc_shared({32, 64}, i32);
          Tile c = alloc_fragment({64, 64}, f32);
          gemm(a, b, c);
        });
      },
      {"gemm: dtype i32 is not supported"});
}

TEST(LangErrors, NonIntegerTileIndex) {
  Fixture f;
  expect_user_error(
      [&] {
        kernel("k", {f.A}, grid(1), threads(128), [&](Var bx) {
          Tile s = alloc_shared({16, 16}, bf16);
          copy(f.A.tile(bx * 0.5f, 0), s);
        });
      },
      {"'A'", "not an integer expression", "f32"});
}

TEST(LangErrors, SharedMemoryOverStatedLimit) {
  Fixture f;
  expect_user_error(
      [&] {
        kernel(
            "k", {f.A}, grid(1), threads(128),
            [&](Var) {
              alloc_shared({128, 64}, bf16);  // 16 KB
              alloc_shared({128, 128}, bf16); // +32 KB > 40 KB
            },
            KernelOptions{.smem_limit = 40 * 1024});
      },
      {"alloc_shared", "49152 bytes", "limit of 40960"});
}

TEST(LangErrors, BlocksPerSmOutOfRange) {
  Fixture f;
  for (int blocks : {0, 5})
    expect_user_error(
        [&] {
          kernel(
              "k", {f.A}, grid(1), threads(128), [&](Var) {},
              KernelOptions{.blocks_per_sm = blocks});
        },
        {"blocks_per_sm = " + std::to_string(blocks), "not 1 to 4"});
}

TEST(LangErrors, WrongNumberOfBlockIndices) {
  Fixture f;
  expect_user_error([&] { kernel("k", {f.A}, grid(4, 4), threads(128), [&](Var) {}); },
                    {"wrong number of block indices", "2 dimension(s)", "takes 1"});
}

TEST(LangErrors, UnboundDim) {
  Fixture f;
  Dim X("X");
  expect_user_error([&] { kernel("k", {f.A}, grid(ceildiv(X, 16)), threads(128), [&](Var) {}); },
                    {"'X' is not bound", "parameter's shape"});
}

TEST(LangErrors, ParallelArityMismatch) {
  Fixture f;
  expect_user_error(
      [&] {
        kernel("k", {f.A}, grid(1), threads(128), [&](Var) {
          Tile s = alloc_fragment({8, 8}, f32);
          parallel({8}, [&](Var i, Var j) { s(i, j) = 0.0f; });
        });
      },
      {"parallel: 1 extents but the body takes 2"});
}

TEST(LangErrors, GlobalToGlobalCopy) {
  Fixture f;
  expect_user_error(
      [&] {
        kernel("k", {f.A, f.C}, grid(1), threads(128), [&](Var) {
          copy(f.A.tile({0, 0}, {16, 16}), f.C.tile({0, 0}, {16, 16}));
        });
      },
      {"both are global tensors"});
}

TEST(LangErrors, BitOperatorOnAFloat) {
  Tensor X("X", {64}, f32), Y("Y", {64}, i32);
  expect_user_error(
      [&] {
        kernel("k", {X, Y}, grid(1), threads(128),
               [&](Var) { parallel({64}, [&](Var i) { Y(i) = Expr(X(i)) & 1; }); });
      },
      {"bit operator '&' on an f32 value", "integer operands", "cast(i32, x)"});
  expect_user_error(
      [&] {
        kernel("k", {X, Y}, grid(1), threads(128),
               [&](Var) { parallel({64}, [&](Var i) { Y(i) = ~Expr(X(i)); }); });
      },
      {"bit operator '~' on an f32 value"});
}

TEST(LangErrors, Int4IsReadOnly) {
  Tensor Q("Q", {64}, int4), Y("Y", {64}, i32);
  expect_user_error(
      [&] {
        kernel("k", {Q, Y}, grid(1), threads(128),
               [&](Var) { parallel({64}, [&](Var i) { Q(i) = Y(i); }); });
      },
      {"store to 'Q' is int4", "read-only", "declare the tensor u8 and store pack_int4"});
  expect_user_error(
      [&] {
        kernel("k", {Q, Y}, grid(1), threads(128), [&](Var) { alloc_shared({64}, int4); });
      },
      {"tile 'shared0' is int4"});
}

TEST(LangErrors, AnnotationsAreTyped) {
  Fixture f;
  // A misspelt annotation is refused, naming the known ones, not silently ignored.
  expect_user_error(
      [&] {
        kernel("k", {f.A, f.C}, grid(1), threads(128), [&](Var) { annotate("swizle", "8"); });
      },
      {"unknown annotation 'swizle'", "swizzle, cluster, persistent"});
  // A value must be an integer in the annotation's range.
  expect_user_error(
      [&] {
        kernel("k", {f.A, f.C}, grid(1), threads(128), [&](Var) { annotate("swizzle", "8x"); });
      },
      {"swizzle=8x is not an integer in [0, 64]", "rasterization"});
  expect_user_error(
      [&] {
        kernel("k", {f.A, f.C}, grid(1), threads(128), [&](Var) { annotate("cluster", "4"); });
      },
      {"cluster=4 is not an integer in [1, 2]"});
  EXPECT_NO_THROW(
      kernel("k", {f.A, f.C}, grid(1), threads(128), [&](Var) { annotate("swizzle", "8"); }));
}

// bitcast reinterprets 32 bits between i32 and f32 only; anything else names both types and
// points to cast.
TEST(LangErrors, BitcastOnlyBetweenI32AndF32) {
  Var x("x");
  expect_user_error([&] { bitcast(bf16, x); }, {"bitcast(bf16, x)", "i32", "cast(bf16, x)"});
  expect_user_error([&] { bitcast(f32, x * 1.5f); }, {"bitcast(f32, x) with x of type f32"});
  expect_user_error([&] { bitcast(i32, x); }, {"bitcast(i32, x) with x of type i32"});
}
