// decode_attention's split-KV kernels on the GPU (label gpu, sm_90a): split then combine, with
// choose_splits' count for the device (or a forced one), agrees with the fp64 reference on
// every element at Llama-3-8B decode shapes (B=1 and 2, contiguous and paged with 16- and
// 64-key pages, 1 and 4 query tokens, an empty and a one-key sequence) and odd ones (more
// splits than key blocks, seven heads of three tokens in f16); the partials and the output
// start poisoned (NaN), so an element left unwritten fails. At B=1 the two kernels together
// beat the single kernel at 8k and 128k keys, and the test prints both kernels' TB/s.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "ops/Check.h"
#include "ops/decode_attention/DecodeAttention.h"
#include "ops/decode_attention/SplitKv.h"
#include "runtime/Driver.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;
namespace da = tp::ops::decode_attention;

namespace {

constexpr int kH200Sms = 132;

const Operator& op() {
  return find_operator("decode_attention");
}

struct Case {
  std::string shape;
  int64_t splits; // 0: choose_splits for an H200
  DType dtype = DType::bf16;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape << " splits=" << c.splits << " " << dtype_name(c.dtype);
}

std::vector<Case> cases() {
  return {{"B=1,H=32,Hkv=8,D=128,L=8192", 0},
          {"B=1,H=32,Hkv=8,D=128,L=32768,paged=1,block=16", 0},
          {"B=1,H=32,Hkv=8,D=128,L=8192,paged=1,block=64", 0},
          {"B=2,H=32,Hkv=8,D=128,L=4096,Sq=4,lens=4096:1", 0},
          {"B=3,H=32,Hkv=8,D=128,L=2048,paged=1,block=16,lens=2048:0:1", 0},
          {"B=2,H=32,Hkv=8,D=128,L=100,lens=100:7", 7}, // 2 key blocks of 64 for 7 splits
          {"B=3,H=14,Hkv=2,D=64,L=777,Sq=3,lens=777:0:5", 5, DType::f16}};
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_s" + std::to_string(i.param.splits) + dtype_name(i.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

Config config_for(const Problem& p, int64_t splits) {
  Config c = da::default_config(p, "sm_90a");
  c["splits"] = splits ? splits : da::choose_splits(p, c, kH200Sms);
  return c;
}

/// The two kernels compiled, and device copies of the args (out last) and the partials.
struct SplitOnGpu {
  CompiledKernel split, combine;
  std::vector<DeviceArray> args, parts;
  std::vector<Arg> split_args() const {
    std::vector<Arg> a(args.begin(), args.end() - 1);
    a.emplace_back(parts[0]);
    a.emplace_back(parts[1]);
    return a;
  }
  std::vector<Arg> combine_args() const { return {parts[0], parts[1], args.back()}; }
  void enqueue(Stream s) const {
    split.launch(split_args(), s);
    combine.launch(combine_args(), s);
  }
};

SplitOnGpu upload(const Problem& p, const Config& c, const std::vector<HostTensor>& host) {
  rt::ensure_context();
  SplitOnGpu g{compile(da::build_split(p, c), {.arch = "sm_90a"}),
               compile(da::build_combine(p, c), {.arch = "sm_90a"}),
               {},
               {}};
  for (const HostTensor& t : host)
    g.args.push_back(DeviceArray::from(t));
  g.args.back().fill_bytes(0xff);
  for (const ArgSpec& s : da::split_intermediates(p, c)) {
    g.parts.emplace_back(s.dtype, s.shape);
    g.parts.back().fill_bytes(0xff);
  }
  return g;
}

class GpuDecodeAttentionSplitKv : public testing::TestWithParam<Case> {};

TEST_P(GpuDecodeAttentionSplitKv, SplitThenCombineMatchesFp64Reference) {
  Problem p = op().parse(parse_kv(GetParam().shape, "--shape"), GetParam().dtype);
  Config c = config_for(p, GetParam().splits);
  std::vector<HostTensor> host = da::make_args(p, 13);
  SplitOnGpu g = upload(p, c, host);
  g.enqueue(nullptr);
  synchronize();
  const int t = da::out_index(p);
  g.args[t].download(host[t]);
  auto [atol, rtol] = default_tolerance(op(), p);
  const int64_t H = p.at("H"), Sq = p.at("Sq"), D = p.at("D");
  int64_t bad = 0, first = -1, i = 0;
  for (int64_t b = 0; b < p.at("B"); ++b) {
    std::vector<double> want = da::reference(p, host, b, 0, H, 0, Sq, 0, D);
    for (double w : want) {
      const double got = host[t].get(i);
      if (!(std::fabs(got - w) <= atol + rtol * std::fabs(w)) && bad++ == 0) first = i;
      ++i;
    }
  }
  EXPECT_EQ(bad, 0) << bad << " elements off (splits=" << c.at("splits")
                    << "), the first at flat index " << first;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuDecodeAttentionSplitKv, testing::ValuesIn(cases()), case_name);

TEST(GpuDecodeAttentionSplitKvSpeed, BatchOneBeatsTheSingleKernel) {
  for (std::string shape : {"B=1,H=32,Hkv=8,D=128,L=8192", "B=1,H=32,Hkv=8,D=128,L=131072",
                            "B=1,H=32,Hkv=8,D=128,L=131072,paged=1,block=16"}) {
    Problem p = op().parse(parse_kv(shape, "--shape"), DType::bf16);
    Config c = config_for(p, 0);
    std::vector<HostTensor> host = da::make_args(p, 14);
    SplitOnGpu g = upload(p, c, host);
    CompiledKernel single = compile(da::build(p, c), {.arch = "sm_90a"});
    std::vector<Arg> single_args(g.args.begin(), g.args.end());
    TimeResult one = time(single, single_args, {.runs = 20, .flush_l2 = true});
    TimeResult two = time([&](Stream s) { g.enqueue(s); }, {.runs = 20, .flush_l2 = true});
    const double bytes = op().min_bytes(p);
    std::cout << shape << ": single " << one.median_ms << " ms (" << bytes / one.median_ms / 1e9
              << " TB/s), split x" << c.at("splits") << " + combine " << two.median_ms << " ms ("
              << bytes / two.median_ms / 1e9 << " TB/s)\n";
    // 8 blocks on 132 SMs against about 128: the split path should win by far more than 2x.
    EXPECT_LT(2 * two.median_ms, one.median_ms) << shape;
  }
}

} // namespace
