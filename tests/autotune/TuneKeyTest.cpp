// Tuning keys: the bucketing rule, which fields make keys differ, and the JSON round trip.
#include <gtest/gtest.h>

#include "FakeHooks.h"
#include "autotune/TuneKey.h"

using namespace tp;
using namespace tp::autotune;
using tp::autotune::testing::fake_h200;

namespace {

ops::Problem problem(const std::string& op, const std::map<std::string, std::string>& kv,
                     DType dt = bf16) {
  return ops::find_operator(op).parse(kv, dt);
}

TuneKey gemm_key(int64_t M, int64_t N, int64_t K, const std::string& layout = "nn") {
  return make_key(problem("gemm", {{"M", std::to_string(M)},
                                   {"N", std::to_string(N)},
                                   {"K", std::to_string(K)},
                                   {"layout", layout}}),
                  fake_h200(), "0.1.0");
}

} // namespace

TEST(TuneKey, SmallSizesExactLargerRoundedUpToPowerOfTwo) {
  EXPECT_EQ(bucket_size(1), 1);
  EXPECT_EQ(bucket_size(77), 77);
  EXPECT_EQ(bucket_size(128), 128);
  EXPECT_EQ(bucket_size(129), 256);
  EXPECT_EQ(bucket_size(256), 256);
  EXPECT_EQ(bucket_size(257), 512);
  EXPECT_EQ(bucket_size(4096), 4096);
  EXPECT_EQ(bucket_size(4097), 8192);
}

TEST(TuneKey, SameBucketSameKeyOtherBucketOtherKey) {
  EXPECT_EQ(gemm_key(3000, 4096, 4096), gemm_key(4096, 4096, 4096));
  EXPECT_EQ(gemm_key(3000, 4096, 4096).shape.at("M"), 4096);
  EXPECT_NE(gemm_key(4097, 4096, 4096), gemm_key(4096, 4096, 4096));
  EXPECT_NE(gemm_key(77, 4096, 4096), gemm_key(78, 4096, 4096));
  EXPECT_NE(gemm_key(4096, 4096, 4096, "nt"), gemm_key(4096, 4096, 4096, "nn"));
  EXPECT_NE(gemm_key(4096, 4096, 4096).file_stem(), gemm_key(8192, 4096, 4096).file_stem());
}

TEST(TuneKey, EveryDeviceAndVersionFieldSeparatesKeys) {
  ops::Problem p = problem("gemm", {{"M", "64"}, {"N", "64"}, {"K", "64"}});
  const TuneKey base = make_key(p, fake_h200(), "0.1.0");
  auto with = [&](auto edit) {
    rt::DeviceInfo d = fake_h200();
    edit(d);
    return make_key(p, d, "0.1.0");
  };
  EXPECT_NE(base, with([](rt::DeviceInfo& d) { d.name = "NVIDIA H100"; }));
  EXPECT_NE(base, with([](rt::DeviceInfo& d) { d.arch = "sm_80"; }));
  EXPECT_NE(base, with([](rt::DeviceInfo& d) { d.sm_count = 114; }));
  EXPECT_NE(base, with([](rt::DeviceInfo& d) { d.driver_version = "12.8"; }));
  EXPECT_NE(base, make_key(p, fake_h200(), "0.2.0"));
  EXPECT_NE(base, make_key(problem("gemm", {{"M", "64"}, {"N", "64"}, {"K", "64"}}, f16),
                           fake_h200(), "0.1.0"));
}

TEST(TuneKey, AttentionKeepsKernelChoosingKeysExact) {
  TuneKey k = make_key(problem("attention", {{"B", "3"},
                                             {"H", "32"},
                                             {"Hkv", "8"},
                                             {"S", "1023"},
                                             {"D", "192"},
                                             {"causal", "1"},
                                             {"lens", "5:1000:7"}}),
                       fake_h200(), "0.1.0");
  EXPECT_EQ(k.shape.at("D"), 192); // not bucketed to 256
  EXPECT_EQ(k.shape.at("causal"), 1);
  EXPECT_EQ(k.shape.at("group"), 4); // H / Hkv
  EXPECT_EQ(k.shape.count("Hkv"), 0u);
  EXPECT_EQ(k.shape.at("S"), 1024);
  EXPECT_EQ(k.shape.at("B"), 3);
  EXPECT_EQ(k.options.at("lens"), "padded");
  TuneKey other = make_key(problem("attention", {{"B", "3"},
                                                 {"H", "32"},
                                                 {"Hkv", "8"},
                                                 {"S", "1000"},
                                                 {"D", "192"},
                                                 {"causal", "1"},
                                                 {"lens", "1:2:3"}}),
                           fake_h200(), "0.1.0");
  EXPECT_EQ(k, other); // same bucket, same kernel, any lengths
}

TEST(TuneKey, JsonRoundTripAndIncompleteJson) {
  TuneKey k = gemm_key(100, 200, 300);
  std::string why;
  auto back = TuneKey::from_json(k.to_json(), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(*back, k);
  EXPECT_EQ(back->canonical(), k.canonical());
  nlohmann::json j = k.to_json();
  j.erase("driver");
  EXPECT_FALSE(TuneKey::from_json(j, &why));
  EXPECT_NE(why.find("not a tuning key"), std::string::npos) << why;
  EXPECT_EQ(k.canonical(),
            "op=gemm|dtype=bf16|shape.K=512|shape.M=100|shape.N=256|shape.decode=0|"
            "opt.layout=nn|gpu=Fake H200 (test)|arch=sm_90a|sms=132|driver=13.0|tilepilot=0.1.0");
}
