// Output boxes read from the kernel (ops/OutputBoxes.h), the default of
// Operator::block_outputs that every built-in operator now relies on. Checked against what
// must hold independently of the derivation: hand-computed boxes, and for every built-in
// operator that the blocks' boxes cover each output element exactly once.
#include <gtest/gtest.h>

#include <string>

#include "ops/Operator.h"
#include "ops/OutputBoxes.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;

namespace {

std::string str(const std::vector<Box>& bs) {
  std::string s;
  for (const Box& b : bs) {
    s += "[t" + std::to_string(b.tensor);
    for (size_t d = 0; d < b.min.size(); ++d)
      s += " " + std::to_string(b.min[d]) + "+" + std::to_string(b.extent[d]);
    s += "]";
  }
  return s;
}

} // namespace

TEST(OutputBoxes, AreTheTilesOfTheStoresClippedToTheTensor) {
  const Operator& gemm = find_operator("gemm");
  const Problem p = gemm.parse({{"M", "77"}, {"N", "45"}, {"K", "33"}}, DType::bf16);
  const Config c = {{"bm", 64}, {"bn", 32}, {"bk", 32}, {"stages", 2}, {"threads", 128}};
  // C is parameter 2; block (x, y) stores the tile at rows 64y, columns 32x.
  EXPECT_EQ(str(gemm.block_outputs(p, c, {0, 0, 0})), "[t2 0+64 0+32]");
  EXPECT_EQ(str(gemm.block_outputs(p, c, {1, 1, 0})), "[t2 64+13 32+13]");
  // rope writes q and k in two halves each: they come back as one box per tensor.
  const Operator& rope = find_operator("rope");
  const Problem r = rope.parse({{"T", "3"}, {"H", "4"}, {"Hkv", "2"}, {"D", "64"}}, DType::bf16);
  EXPECT_EQ(str(rope.block_outputs(r, rope.default_config(r, "cpu"), {2, 0, 0})),
            "[t3 2+1 0+4 0+64][t4 2+1 0+2 0+64]");
}

TEST(OutputBoxes, OfEveryOperatorCoverEachOutputElementOnce) {
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> cases = {
      {"gemm", {{"M", "77"}, {"N", "45"}, {"K", "33"}}},
      {"gemm", {{"M", "300"}, {"N", "520"}, {"K", "64"}, {"layout", "nt"}}},
      {"attention", {{"B", "2"}, {"H", "3"}, {"S", "77"}, {"D", "64"}, {"causal", "1"}}},
      {"attention", {{"B", "1"}, {"H", "2"}, {"S", "40"}, {"D", "64"}, {"lse", "1"}}},
      {"rmsnorm", {{"T", "7"}, {"H", "96"}, {"residual", "1"}}},
      {"swiglu", {{"T", "5"}, {"I", "300"}}},
      {"rope", {{"T", "3"}, {"H", "4"}, {"Hkv", "2"}, {"D", "64"}}},
      {"decode_attention", {{"B", "2"}, {"H", "8"}, {"Hkv", "2"}, {"D", "64"}, {"L", "100"}}},
      {"w4a16_gemm", {{"M", "3"}, {"N", "77"}, {"K", "256"}}},
      {"grouped_gemm",
       {{"E", "4"}, {"R", "106"}, {"N", "45"}, {"K", "32"}, {"counts", "37:0:64:5"}}},
  };
  for (const auto& [name, shape] : cases) {
    const Operator& op = find_operator(name);
    const Problem p = op.parse(shape, DType::bf16);
    const std::vector<ArgSpec> specs = op.arg_specs(p);
    for (const std::string arch : {"cpu", "sm_90a"}) {
      const Config cfg = op.default_config(p, arch);
      std::map<int, std::vector<int>> hits; // output -> times each element is claimed
      for (int o : op.outputs(p)) {
        int64_t n = 1;
        for (int64_t e : specs[o].shape)
          n *= e;
        hits[o].assign(n, 0);
      }
      const std::array<int64_t, 3> g = op.grid(p, cfg);
      for (int64_t z = 0; z < g[2]; ++z)
        for (int64_t y = 0; y < g[1]; ++y)
          for (int64_t x = 0; x < g[0]; ++x)
            for (const Box& b : op.block_outputs(p, cfg, {x, y, z})) {
              const std::vector<int64_t>& shape = specs.at(b.tensor).shape;
              std::vector<int64_t> idx(shape.size(), 0);
              for (bool more = true; more;) {
                int64_t flat = 0;
                for (size_t d = 0; d < shape.size(); ++d)
                  flat = flat * shape[d] + b.min[d] + idx[d];
                ++hits.at(b.tensor).at(flat);
                more = false;
                for (size_t d = shape.size(); d-- > 0;)
                  if (++idx[d] < b.extent[d]) {
                    more = true;
                    break;
                  } else {
                    idx[d] = 0;
                  }
              }
            }
      for (const auto& [o, h] : hits)
        for (size_t i = 0; i < h.size(); ++i)
          ASSERT_EQ(h[i], 1) << name << " " << p.shape_str() << " on " << arch << ": element " << i
                             << " of output " << o;
    }
  }
}

TEST(OutputBoxes, AStoreAtALoadedPositionIsNotDerivable) {
  // out[idx[i]] = x[i]: where a block writes depends on the data.
  Dim N("N");
  Tensor X("x", {N}, f32), I("idx", {N}, i32), O("out", {N}, f32);
  Kernel k = kernel("scatter", {X, I, O}, grid(ceildiv(N, 32)), threads(32), [&](Var bx) {
    parallel({32}, [&](Var i) {
      Expr at = bx * 32 + i;
      if_then(at < N, [&] { O(I(at)) = X(at); });
    });
  });
  const std::vector<ArgSpec> specs = {{f32, {40}}, {i32, {40}}, {f32, {40}}};
  EXPECT_FALSE(output_boxes(k, specs, {2}, {0, 0, 0}));
  // The same kernel storing at its own index is a box, clipped by the guard.
  Kernel own = kernel("copy", {X, I, O}, grid(ceildiv(N, 32)), threads(32), [&](Var bx) {
    parallel({32}, [&](Var i) {
      Expr at = bx * 32 + i;
      if_then(at < N, [&] { O(at) = X(at); });
    });
  });
  std::optional<std::vector<Box>> b = output_boxes(own, specs, {2}, {1, 0, 0});
  ASSERT_TRUE(b);
  EXPECT_EQ(str(*b), "[t2 32+8]");
}
