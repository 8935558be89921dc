// The Operator interface's shared behaviour, on the built-in operators: one knob check with
// named ranges per arch, the default grid read from the built kernel, the default host framework
// (the fp64 reference over every block's boxes), problems from tensor shapes, the tuning key's
// and registry's rules.
#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <sstream>

#include "ops/Operator.h"
#include "tilepilot/dispatch.h"

using namespace tp;
using namespace tp::ops;

namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

Problem gemm_problem(int64_t M, int64_t N, int64_t K, const std::string& layout = "nn") {
  return find_operator("gemm").parse({{"M", std::to_string(M)},
                                      {"N", std::to_string(N)},
                                      {"K", std::to_string(K)},
                                      {"layout", layout}},
                                     DType::bf16);
}

Problem attention_problem(const std::map<std::string, std::string>& kv) {
  return find_operator("attention").parse(kv, DType::bf16);
}

} // namespace

TEST(OperatorInterface, KnobRangesAreCheckedOnceWithTheirRange) {
  const Operator& gemm = find_operator("gemm");
  Config c = gemm.default_config(gemm_problem(256, 256, 256), "sm_90a");
  EXPECT_NO_THROW(validate_knobs(gemm, c, "sm_90a"));
  c["stages"] = 9;
  std::string m = message_of([&] { validate_knobs(gemm, c, "sm_90a"); });
  EXPECT_NE(m.find("gemm: config stages=9 is out of range on sm_90a; stages takes [1, 8]"),
            std::string::npos)
      << m;
  c["stages"] = 4;
  c["bogus"] = 1;
  m = message_of([&] { validate_knobs(gemm, c, "sm_90a"); });
  EXPECT_NE(m.find("unknown config knob 'bogus' on sm_90a; the knobs are bm, bn, bk"),
            std::string::npos)
      << m;
}

TEST(OperatorInterface, OneConfigCheckForEveryOperatorAndArch) {
  // For every operator: the default config passes check_config on its arch; leaving out a
  // required knob names it; completing a partial config keeps the given knob and fills the rest.
  for (const Operator* op : all_operators()) {
    std::map<std::string, std::string> kv = op->example_shape();
    if (kv.empty()) continue;
    // bf16, or f32 for an operator that takes only f32 (a test's own, registered in this
    // process by another test: KernelProgramTest's two-kernel row sum).
    const Problem p = message_of([&] { op->parse(kv, DType::bf16); }).empty()
                          ? op->parse(kv, DType::bf16)
                          : op->parse(kv, DType::f32);
    for (const std::string arch : {"cpu", "sm_80", "sm_90a"}) {
      const Config c = op->default_config(p, arch);
      EXPECT_NO_THROW(check_config(*op, p, c, arch)) << op->name() << " on " << arch;
      for (const Knob& k : op->knobs(arch)) {
        if (!k.required()) continue;
        Config partial = c;
        partial.erase(k.name);
        std::string m = message_of([&] { check_config(*op, p, partial, arch); });
        EXPECT_NE(m.find("is missing " + k.name), std::string::npos) << op->name() << ": " << m;
        Config done = complete_config(*op, p, arch, {{k.name, c.at(k.name)}});
        EXPECT_EQ(done, c) << op->name() << " on " << arch;
      }
    }
  }
}

TEST(OperatorInterface, DefaultConfigsFitSharedMemoryInEveryDtype) {
  // Each operator's default config, in every dtype it parses, at its example shape and (gemm)
  // decode and odd shapes, plans within the arch's shared memory: an f32 gemm once got the
  // bf16 stage count and could not be built at all (416 KB on sm_90a).
  for (const Operator* op : all_operators()) {
    std::vector<std::map<std::string, std::string>> shapes = {op->example_shape()};
    if (op->name() == "gemm")
      for (auto [m, n, k] : {std::array<const char*, 3>{"1", "4096", "4096"},
                             {"7", "130", "1000"},
                             {"4096", "4096", "4096"},
                             {"64", "28672", "4096"}})
        shapes.push_back({{"M", m}, {"N", n}, {"K", k}, {"layout", "nn"}});
    for (const auto& kv : shapes) {
      if (kv.empty()) continue;
      for (DType t : {DType::bf16, DType::f16, DType::f32}) {
        Problem p;
        try {
          p = op->parse(kv, t);
        } catch (const UserError&) {
          continue; // a dtype this operator does not take
        }
        for (const char* arch : {"sm_80", "sm_90a"}) {
          const Config c = op->default_config(p, arch);
          const int64_t limit = std::string(arch) == "sm_90a" ? 232448 : 166912;
          EXPECT_LE(op->estimate(p, c, arch).smem_bytes, limit)
              << op->name() << " " << p.shape_str() << " " << dtype_name(t) << " on " << arch
              << ": " << config_str(c);
        }
      }
    }
  }
}

TEST(OperatorInterface, KnobDomainsIncludeTheirStep) {
  const Operator& gemm = find_operator("gemm");
  const Problem p = gemm_problem(256, 256, 256);
  std::string m = message_of([&] { complete_config(gemm, p, "sm_90a", {{"bn", 72}}); });
  EXPECT_NE(m.find("bn=72 is out of range on sm_90a; bn takes a multiple of 16 in [16, 512]"),
            std::string::npos)
      << m;
  // Optional knobs (a neutral value they accept) may be left out; required ones may not.
  for (const Knob& k : gemm.knobs("sm_90a"))
    EXPECT_EQ(k.required(), k.name != "swizzle" && k.name != "cluster" && k.name != "persistent" &&
                                k.name != "splits" && k.name != "gemv" && k.name != "swap_ab" &&
                                k.name != "pad_k")
        << k.name;
  EXPECT_EQ(parse_knob_value("bm", "128", "--config"), 128);
  for (const char* bad : {"", "1.5", "-4", "12x", "99999999999999999999"}) {
    m = message_of([&] { parse_knob_value("bm", bad, "--space"); });
    EXPECT_NE(m.find("is not a non-negative integer; write e.g. bm=64|128"), std::string::npos)
        << bad << ": " << m;
  }
}

TEST(OperatorInterface, TmaOnlyKnobsAreRefusedOnSm80) {
  const Operator& gemm = find_operator("gemm");
  Config c = {{"bm", 128},   {"bn", 128},      {"bk", 32},
              {"stages", 3}, {"threads", 128}, {"cluster", 2}};
  EXPECT_NO_THROW(validate_knobs(gemm, c, "sm_90a"));
  EXPECT_NO_THROW(validate_knobs(gemm, c, "cpu")); // the interpreter ignores clusters
  std::string m = message_of([&] { validate_knobs(gemm, c, "sm_80"); });
  EXPECT_NE(m.find("cluster=2 is not available on sm_80; there cluster takes [1, 1]"),
            std::string::npos)
      << m;
  const Operator& att = find_operator("attention");
  Config a = {{"bm", 64}, {"bn", 64}, {"stages", 2}, {"threads", 128}, {"persistent", 1}};
  m = message_of([&] { validate_knobs(att, a, "sm_80"); });
  EXPECT_NE(m.find("persistent=1 is not available on sm_80"), std::string::npos) << m;
}

TEST(OperatorInterface, TheTunerSearchesWhatTheArchAllows) {
  const Operator& gemm = find_operator("gemm");
  for (const Knob& k : gemm.knobs("sm_90a"))
    if (k.name == "bk") EXPECT_EQ(k.values, std::vector<int64_t>{64});
  for (const Knob& k : gemm.knobs("sm_80"))
    if (k.name == "cluster") EXPECT_EQ(k.values, std::vector<int64_t>{1});
  // Every searched value is one a config may set.
  for (const char* arch : {"sm_80", "sm_90a", "cpu"})
    for (const Operator* op : all_operators())
      for (const Knob& k : op->knobs(arch))
        for (int64_t v : k.values)
          EXPECT_TRUE(k.accepts(v)) << op->name() << " " << arch << " " << k.name << "=" << v;
}

TEST(OperatorInterface, TheDefaultGridIsTheKernelsOwn) {
  const Operator& gemm = find_operator("gemm");
  Problem p = gemm_problem(300, 200, 64);
  Config c = {{"bm", 64}, {"bn", 128}, {"bk", 32}, {"stages", 2}, {"threads", 128}};
  EXPECT_EQ(gemm.grid(p, c), (std::array<int64_t, 3>{2, 5, 1})); // ceil(200/128), ceil(300/64)
  const Operator& att = find_operator("attention");
  Problem q = attention_problem({{"B", "3"}, {"H", "4"}, {"S", "130"}, {"D", "64"}});
  Config ac = {{"bm", 64}, {"bn", 64}, {"stages", 1}, {"threads", 128}};
  EXPECT_EQ(att.grid(q, ac), (std::array<int64_t, 3>{3, 4, 3})); // ceil(130/64), H, B
}

TEST(OperatorInterface, TheHostFrameworkIsTheReferenceOverEveryOutput) {
  for (const char* name : {"gemm", "attention"}) {
    const Operator& op = find_operator(name);
    Problem p = std::string(name) == "gemm" ? gemm_problem(33, 70, 19, "tn")
                                            : attention_problem({{"B", "2"},
                                                                 {"H", "2"},
                                                                 {"S", "33"},
                                                                 {"D", "16"},
                                                                 {"causal", "1"},
                                                                 {"lse", "1"}});
    std::vector<HostTensor> args = op.make_args(p, 11);
    op.run_host_framework(p, args);
    for (int o : op.outputs(p)) {
      const HostTensor& t = args[o];
      // The reference over boxes it takes: all of C; one (batch, head) of O or LSE at a time.
      std::vector<Box> boxes;
      const std::vector<int64_t>& sh = t.shape();
      if (std::string(name) == "gemm") {
        boxes.push_back(Box{o, {0, 0}, sh});
      } else {
        for (int64_t b = 0; b < sh[0]; ++b)
          for (int64_t h = 0; h < sh[1]; ++h) {
            Box box{o, {b, h}, {1, 1}};
            for (size_t d = 2; d < sh.size(); ++d) {
              box.min.push_back(0);
              box.extent.push_back(sh[d]);
            }
            boxes.push_back(box);
          }
      }
      int64_t flat = 0; // the boxes above tile the tensor in row-major order
      for (const Box& box : boxes)
        for (double want : op.reference(p, args, box)) {
          HostTensor one(t.dtype(), {1});
          one.set(0, want); // rounded once into the output's dtype
          if (std::isinf(want))
            EXPECT_EQ(t.get(flat), want) << name << " output " << o << " element " << flat;
          else
            EXPECT_EQ(t.get(flat), one.get(0)) << name << " output " << o << " element " << flat;
          ++flat;
        }
      EXPECT_EQ(flat, t.numel());
    }
  }
}

TEST(OperatorInterface, ProblemsComeFromTensorShapes) {
  const Operator& gemm = find_operator("gemm");
  Problem p = gemm.problem_for({{5, 7}, {9, 7}, {5, 9}}, {DType::f16, DType::f16, DType::f16},
                               {{"layout", "nt"}});
  EXPECT_EQ(p.shape_str(), "K=7,M=5,N=9,layout=nt");
  std::string m = message_of([&] {
    gemm.problem_for({{5, 7}, {8, 9}, {5, 9}}, {DType::f16, DType::f16, DType::f16}, {});
  });
  EXPECT_NE(m.find("shapes do not agree for layout nn"), std::string::npos) << m;
  m = message_of([&] { gemm.problem_from_inputs({{5, 7}}, {DType::f16}, {}); });
  EXPECT_NE(m.find("cannot be called on input tensors alone"), std::string::npos) << m;
}

TEST(OperatorInterface, TheRegistryKnowsEachNameOnce) {
  std::string m = message_of([] { find_operator("gemmm"); });
  EXPECT_NE(m.find("unknown operator 'gemmm'; known operators: gemm, attention"), std::string::npos)
      << m;
  EXPECT_NE(m.find("--plugin"), std::string::npos) << m;
  EXPECT_EQ(operator_origin("gemm"), "built-in");
}

TEST(OperatorInterface, DispatchRunsAnyOperatorByName) {
  // No release: the call takes the operator's host framework, counted under the operator.
  Dispatcher d;
  HostTensor a(DType::f32, {3, 4}), b(DType::f32, {4, 2}), c(DType::f32, {3, 2});
  a.fill_random(1);
  b.fill_random(2);
  c.poison();
  d.run("gemm", {&a, &b, &c});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      double want = 0;
      for (int64_t k = 0; k < 4; ++k)
        want += a.get(i * 4 + k) * b.get(k * 2 + j);
      EXPECT_NEAR(c.get(i * 2 + j), want, 1e-5);
    }
  EXPECT_EQ(d.counters("gemm").fallbacks(), 1);
  std::string m = message_of([&] { d.run("gemm", {&a, &b}); });
  EXPECT_NE(m.find("gemm: takes three tensors (A, B, C), got 2"), std::string::npos) << m;
}
