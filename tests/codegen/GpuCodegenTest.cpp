// GPU tests of the CUDA backend (ctest label gpu; they need an sm_90a device): the generated
// GEMM and attention kernels agree with the fp64 references across layouts, dtypes, masks and
// edge shapes, with fresh seeded inputs, poisoned outputs, and NaN never passing.
#include <gtest/gtest.h>

#include "compile/CudaKernel.h"
#include "ops/CudaCheck.h"
#include "runtime/Driver.h"
#include "runtime/Launch.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Case {
  std::string op, shape;
  DType dtype;
  std::string config;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string n = info.param.op + "_" + info.param.shape + "_" + dtype_name(info.param.dtype) +
                  (info.param.config.empty() ? "" : "_" + info.param.config);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (DType t : {DType::bf16, DType::f16})
    for (std::string layout : {"nn", "nt", "tn"}) {
      for (std::string s : {"M=1,N=45,K=133", "M=7,N=256,K=64", "M=129,N=200,K=300",
                            "M=256,N=512,K=256", "M=300,N=1000,K=520", "M=1024,N=1024,K=1024"})
        out.push_back({"gemm", s + ",layout=" + layout, t, ""});
    }
  // The GEMV (the default at M = 1, layout nt): tails in N and K, K not 16-byte aligned (the
  // serial loop), and a grid of several waves.
  for (std::string s : {"M=1,N=4093,K=4100", "M=1,N=77,K=333", "M=1,N=20000,K=520"})
    out.push_back({"gemm", s + ",layout=nt", DType::bf16,
                   "gemv=1,bm=64,bn=16,bk=256,stages=4,threads=256,splits=1"});
  out.push_back({"gemm", "M=1,N=300,K=1000,layout=nt", DType::f16,
                 "gemv=1,bm=64,bn=32,bk=128,stages=3,threads=256,splits=1"});
  // Several rows a block, the last block row partly past M.
  out.push_back({"gemm", "M=3,N=4093,K=4100,layout=nt", DType::bf16,
                 "gemv=2,bm=64,bn=16,bk=256,stages=4,threads=256,splits=1"});
  out.push_back({"gemm", "M=7,N=1000,K=520,layout=nt", DType::bf16,
                 "gemv=4,bm=64,bn=16,bk=128,stages=4,threads=256,splits=1"});
  // Layout nn: B [K, N] read in rows of bn columns, K summed across warps at the end; tails in
  // N and K, N not 16-byte aligned (the serial loop), two rows a block.
  for (std::string s : {"M=1,N=4096,K=4100", "M=1,N=77,K=333", "M=1,N=20000,K=520"})
    out.push_back({"gemm", s + ",layout=nn", DType::bf16,
                   "gemv=1,bm=64,bn=64,bk=128,stages=4,threads=256,splits=1"});
  out.push_back({"gemm", "M=3,N=4093,K=1000,layout=nn", DType::f16,
                 "gemv=2,bm=64,bn=32,bk=64,stages=3,threads=256,splits=1"});
  out.push_back(
      {"gemm", "M=512,N=512,K=512", DType::bf16, "bm=128,bn=128,bk=64,stages=3,threads=128"});
  out.push_back(
      {"gemm", "M=512,N=384,K=512", DType::bf16, "bm=64,bn=128,bk=64,stages=2,threads=128"});
  // Tile widths that are not powers of two (wgmma N = 160 and 208), with ragged edges.
  for (std::string bn : {"160", "208"})
    out.push_back({"gemm", "M=700,N=1000,K=520,layout=nt", DType::bf16,
                   "bm=128,bn=" + bn + ",bk=64,stages=3,threads=256"});
  out.push_back({"gemm", "M=1000,N=1000,K=999", DType::bf16,
                 "bm=128,bn=256,bk=64,stages=4,threads=256,swizzle=8"});
  // 2-block clusters with B multicast: split by boxes (nn, tn) and by rows (nt, and the 64x64
  // tile's single box); odd block-row counts (5, 3, 1) launch a spare block.
  for (std::string layout : {"nn", "nt", "tn"})
    out.push_back({"gemm", "M=640,N=1000,K=520,layout=" + layout, DType::bf16,
                   "bm=128,bn=256,bk=64,stages=4,threads=256,swizzle=8,cluster=2"});
  out.push_back({"gemm", "M=150,N=264,K=520,layout=nt", DType::f16,
                 "bm=64,bn=64,bk=64,stages=4,threads=128,cluster=2"});
  out.push_back({"gemm", "M=8,N=264,K=520,layout=nn", DType::bf16,
                 "bm=64,bn=64,bk=64,stages=8,threads=128,cluster=2"});
  // Persistent clusters: pairs of tiles dealt to the clusters in turn, several each (and stage
  // and parity carried across them); odd block-row counts (25, 9) give pairs whose second
  // block only loads; a shape with fewer pairs than clusters leaves clusters idle.
  for (std::string layout : {"nn", "nt", "tn"})
    out.push_back({"gemm", "M=3200,N=3000,K=520,layout=" + layout, DType::bf16,
                   "bm=128,bn=256,bk=64,stages=4,threads=256,swizzle=8,cluster=2,persistent=1"});
  out.push_back({"gemm", "M=1100,N=2000,K=1000", DType::f16,
                 "bm=128,bn=128,bk=64,stages=4,threads=256,cluster=2,persistent=1"});
  out.push_back({"gemm", "M=300,N=264,K=200,layout=nt", DType::bf16,
                 "bm=64,bn=64,bk=64,stages=4,threads=128,cluster=2,persistent=1"});
  // Persistent kernels: more tiles than SMs, so blocks take several tiles and the pipeline's
  // stage and parity carry across tiles (9 k-steps per tile: odd, so parities alternate).
  for (std::string layout : {"nn", "nt", "tn"})
    out.push_back({"gemm", "M=1000,N=1000,K=520,layout=" + layout, DType::bf16,
                   "bm=64,bn=64,bk=64,stages=4,threads=128,persistent=1"});
  out.push_back({"gemm", "M=3000,N=2000,K=1000", DType::f16,
                 "bm=128,bn=256,bk=64,stages=4,threads=256,swizzle=8,persistent=1"});
  out.push_back({"gemm", "M=2048,N=2048,K=16", DType::bf16,
                 "bm=128,bn=128,bk=64,stages=3,threads=256,persistent=1"});
  for (std::string extra :
       {"B=4,H=16,Hkv=4,S=1000,Skv=1200,D=128,causal=1",
        "B=4,H=16,Hkv=16,S=1000,Skv=333,D=128,causal=1",
        "B=3,H=32,S=300,Skv=500,D=128,lens=500:17:0,causal=1,lse=1", "B=2,H=32,S=1024,D=128"})
    out.push_back(
        {"attention", extra, DType::bf16, "bm=128,bn=128,stages=2,threads=256,persistent=1"});
  out.push_back({"attention", "B=2,H=32,S=2048,D=128", DType::f16,
                 "bm=192,bn=128,stages=2,threads=384,persistent=1"});
  out.push_back({"attention", "B=4,H=16,S=1000,D=64,causal=1", DType::bf16,
                 "bm=128,bn=128,stages=3,threads=256,persistent=1"});
  // The schedule options, each with and without persistence, on tiles with no key blocks
  // (Skv < S, causal) and a zero key length: ping-pong turns between the consumer warpgroups,
  // and the deferred P.V (overlap=1).
  for (std::string option : {"pingpong=1", "overlap=1", "overlap=1,pingpong=1"}) {
    for (std::string extra : {"B=4,H=16,Hkv=4,S=1000,Skv=1200,D=128,causal=1",
                              "B=4,H=16,Hkv=16,S=1000,Skv=333,D=128,causal=1",
                              "B=3,H=32,S=300,Skv=500,D=128,lens=500:17:0,causal=1,lse=1"})
      for (std::string persistent : {"0", "1"})
        out.push_back(
            {"attention", extra, DType::bf16,
             "bm=128,bn=128,stages=2,threads=256," + option + ",persistent=" + persistent});
    out.push_back({"attention", "B=2,H=16,S=700,D=256,causal=1", DType::bf16,
                   "bm=128,bn=64,stages=2,threads=256," + option + ",persistent=1"});
  }
  out.push_back({"attention", "B=4,H=16,S=1000,D=64", DType::f16,
                 "bm=128,bn=128,stages=3,threads=256,pingpong=1,persistent=1"});
  // Key blocks of 176 and 80 (wgmma widths that are not powers of two), causal with a ragged
  // last block and not.
  for (std::string shape : {"B=2,H=16,S=1000,Skv=1200,D=128,causal=1", "B=2,H=16,S=700,D=128"})
    out.push_back({"attention", shape, DType::bf16,
                   "bm=128,bn=176,stages=2,threads=256,overlap=1,persistent=1"});
  out.push_back({"attention", "B=2,H=16,S=1000,D=64,causal=1", DType::bf16,
                 "bm=128,bn=80,stages=3,threads=256,overlap=1,persistent=1"});
  out.push_back({"attention", "B=4,H=16,S=2048,D=128", DType::f16,
                 "bm=128,bn=128,stages=3,threads=256,overlap=1,persistent=1"});
  out.push_back({"attention", "B=4,H=16,S=1000,D=64,causal=1", DType::bf16,
                 "bm=128,bn=128,stages=2,threads=256,overlap=1"});
  out.push_back({"attention", "B=4,H=16,S=700,D=256", DType::bf16,
                 "bm=128,bn=64,stages=2,threads=256,persistent=1"});
  for (DType t : {DType::bf16, DType::f16})
    for (std::string d : {"64", "128", "256"})
      for (std::string s :
           {"B=1,H=2,S=1", "B=2,H=2,S=77", "B=1,H=2,S=128", "B=1,H=2,S=1023", "B=1,H=2,S=4096"})
        for (std::string c : {",causal=0", ",causal=1"})
          out.push_back({"attention", s + ",D=" + d + c, t, ""});
  for (std::string extra : {"B=1,H=8,Hkv=2,S=333,Skv=1000,D=128,causal=1",
                            "B=1,H=8,Hkv=8,S=1000,Skv=333,D=128,causal=1",
                            "B=1,H=4,Hkv=1,S=512,D=64", "B=2,H=8,Hkv=1,S=200,D=128,causal=1,lse=1",
                            "B=3,H=4,S=300,Skv=500,D=128,lens=500:17:0,causal=1,lse=1",
                            "B=3,H=2,S=128,D=64,lens=5:128:64"})
    out.push_back({"attention", extra, DType::bf16, ""});
  return out;
}

class GpuCodegen : public testing::TestWithParam<Case> {};

TEST_P(GpuCodegen, MatchesFp64Reference) {
  const Case& c = GetParam();
  const Operator& op = find_operator(c.op);
  Problem p = op.parse(parse_kv(c.shape, "shape"), c.dtype);
  CheckOptions o;
  o.seed = 7;
  o.reference_budget = 4e8; // a few sampled blocks per case; the NaN scan covers all outputs
  if (!c.config.empty()) o.config = parse_config(c.config);
  CheckResult r = check_cuda(op, p, o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_EQ(r.nonfinite, 0) << to_json(r).dump();
  std::cout << to_json(r).dump() << "\n";
}

INSTANTIATE_TEST_SUITE_P(Ops, GpuCodegen, testing::ValuesIn(cases()), case_name);

// A persistent kernel's tile counter must be zero again after every launch (its last block
// resets it): launch one kernel object repeatedly on one stream and on a second stream, with
// the output poisoned each time; every launch must write every element, identically.
TEST(GpuPersistent, RepeatedLaunchesOnTwoStreamsEachCoverEveryTile) {
  const Operator& op = find_operator("gemm");
  Problem p = op.parse(parse_kv("M=1000,N=1000,K=520", "shape"), DType::bf16);
  Kernel k = op.build(p, parse_config("bm=64,bn=64,bk=64,stages=4,threads=128,persistent=1"));
  std::vector<HostTensor> args = op.make_args(p, 5);
  rt::ensure_context();
  DeviceArgs d = DeviceArgs::upload(args);
  cuda::CudaKernel ck(k, device_arch());
  ASSERT_TRUE(ck.lowered().persistent);
  rt::Stream s1, s2;
  std::vector<uint16_t> first;
  for (int run = 0; run < 6; ++run) {
    CUstream s = run < 3 ? s1.get() : s2.get();
    d.buffers[2].memset(0xFF, s); // NaN in bf16
    ck.launch(d.tensors, s);
    TILEPILOT_CU(rt::driver().cuStreamSynchronize(s));
    std::vector<uint16_t> c = d.buffers[2].to_vector<uint16_t>();
    size_t nan = 0;
    for (uint16_t v : c)
      nan += (v & 0x7F80) == 0x7F80 && (v & 0x7F);
    EXPECT_EQ(nan, 0u) << "launch " << run;
    if (run == 0)
      first = c;
    else
      EXPECT_TRUE(c == first) << "launch " << run << " differs from the first";
  }
}

TEST(GpuCodegenErrors, WrongShapeAtLaunchIsAUserError) {
  const Operator& op = find_operator("gemm");
  Problem p = op.parse(parse_kv("M=64,N=64,K=64", "shape"), DType::bf16);
  Kernel k = op.build(p, op.default_config(p, "sm_90a"));
  std::vector<HostTensor> args = op.make_args(p, 1);
  args[2] = HostTensor(DType::bf16, {65, 64});
  rt::ensure_context();
  DeviceArgs d = DeviceArgs::upload(args);
  cuda::CudaKernel ck(k, device_arch());
  try {
    ck.launch(d.tensors);
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("Dim M is 64 from tensor 'A' but 65 from tensor 'C'"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
