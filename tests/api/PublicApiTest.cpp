// The public kernel API as a user's program sees it (public headers only): interpret, compile
// for a named arch without a GPU (source, lowered IR, PTX, resources), the argument checks that
// run before any driver call, DeviceTensor strides and DLPack views. The Gpu* tests launch,
// time and compare with the interpreter on a device.
#include <gtest/gtest.h>

#include <tilepilot/dlpack.h>
#include <tilepilot/tilepilot.h>

using namespace tp;

namespace {

/// B = A * 2 + 1 (bf16 in, f32 out) through shared memory and a fragment, 32x64 tiles.
Kernel scale_shift() {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {M, N}, f32);
  return kernel("scale_shift", {A, B}, grid(ceildiv(N, 64), ceildiv(M, 32)), threads(128),
                [&](Var bx, Var by) {
                  Tile s = alloc_shared({32, 64}, bf16);
                  Tile f = alloc_fragment({32, 64}, f32);
                  copy(A.tile(by * 32, bx * 64), s);
                  copy(s, f);
                  parallel({32, 64}, [&](Var i, Var j) { f(i, j) = f(i, j) * 2.0f + 1.0f; });
                  copy(f, B.tile(by * 32, bx * 64));
                });
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no user error>";
}

} // namespace

TEST(PublicApi, InterpretWritesEveryElementOfTheOutput) {
  HostTensor a(bf16, {45, 130}), b(f32, {45, 130});
  a.fill_random(3);
  b.poison();
  interpret(scale_shift(), {a, b});
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_EQ(b.get(i), a.get(i) * 2 + 1) << "element " << i;
}

TEST(PublicApi, InterpretNamesAMissingArgument) {
  HostTensor a(bf16, {4, 4});
  EXPECT_NE(message_of([&] { interpret(scale_shift(), {a}); }).find("takes 2 arguments, got 1"),
            std::string::npos);
}

TEST(PublicApi, InterpretRefusesANumberForATensor) {
  HostTensor a(bf16, {4, 4});
  std::string m = message_of([&] { interpret(scale_shift(), {a, 2.0}); });
  EXPECT_NE(m.find("tensor 'B' is a number"), std::string::npos) << m;
}

TEST(PublicApi, CompileForANamedArchNeedsNoGpu) {
  CompiledKernel ck = compile(scale_shift(), {.arch = "sm_90a"});
  EXPECT_EQ(ck.arch(), "sm_90a");
  EXPECT_NE(ck.source().find("scale_shift"), std::string::npos);
  EXPECT_NE(ck.ptx().find(".entry"), std::string::npos);
  Resources r = ck.resources();
  EXPECT_GT(r.registers, 0);
  EXPECT_EQ(r.threads, 128); // threads(128), no producer warps: nothing is pipelined
  EXPECT_EQ(ck.config().at("arch"), "sm_90a");
  EXPECT_FALSE(ck.lowered().empty());
}

TEST(PublicApi, CompiledKernelsShareTheirState) {
  CompiledKernel a = compile(scale_shift(), {.arch = "sm_80"});
  CompiledKernel b = a;
  EXPECT_EQ(&a.kernel(), &b.kernel());
  EXPECT_EQ(a.ptx(), b.ptx());
}

TEST(PublicApi, AnEmptyCompiledKernelSaysHowToMakeOne) {
  CompiledKernel ck;
  EXPECT_NE(message_of([&] { ck.source(); }).find("tp::compile(kernel)"), std::string::npos);
}

TEST(PublicApi, LaunchChecksArgumentsBeforeTouchingTheGpu) {
  CompiledKernel ck = compile(scale_shift(), {.arch = "sm_90a"});
  DeviceTensor a(uint64_t{256}, bf16, {8, 8});
  EXPECT_NE(message_of([&] { ck.launch({a}); }).find("takes 2 arguments, got 1"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              ck.launch({a, 1.5f});
            }).find("tensor 'B' is a number"),
            std::string::npos);
  DeviceTensor strided(uint64_t{256}, f32, {8, 8}, {16, 1});
  EXPECT_NE(message_of([&] {
              ck.launch({a, strided});
            }).find("'B' is not contiguous"),
            std::string::npos);
  DeviceTensor bad_rank(uint64_t{256}, f32, {8, 8}, {1});
  EXPECT_NE(message_of([&] {
              ck.launch({a, bad_rank});
            }).find("2 dimensions but 1 strides"),
            std::string::npos);
}

TEST(PublicApi, DeviceTensorStridesAreElementsOutermostFirst) {
  DeviceTensor t(uint64_t{0}, f32, {3, 4, 5});
  EXPECT_EQ(t.element_strides(), (std::vector<int64_t>{20, 5, 1}));
  EXPECT_TRUE(t.contiguous());
  EXPECT_EQ(t.numel(), 60);
  t.strides = {20, 5, 1};
  EXPECT_TRUE(t.contiguous());
  t.strides = {40, 5, 1}; // every other row block of a larger tensor
  EXPECT_FALSE(t.contiguous());
  DeviceTensor unit(uint64_t{0}, f32, {1, 4}, {999, 1}); // a unit dim's stride is irrelevant
  EXPECT_TRUE(unit.contiguous());
}

TEST(PublicApi, DlpackViewsKeepShapeStridesAndOffset) {
  int64_t shape[2] = {4, 6}, strides[2] = {8, 1};
  DLTensor t{};
  t.data = reinterpret_cast<void*>(uintptr_t{0x10000});
  t.device = {kDLCUDA, 0};
  t.ndim = 2;
  t.dtype = {kDLBfloat, 16, 1};
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = 32;
  DeviceTensor d = from_dlpack(t);
  EXPECT_EQ(d.ptr, 0x10000u + 32);
  EXPECT_EQ(d.dtype, bf16);
  EXPECT_EQ(d.shape, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(d.strides, (std::vector<int64_t>{8, 1}));
  EXPECT_FALSE(d.contiguous());
}

TEST(PublicApi, DlpackRefusesWhatItCannotView) {
  int64_t shape[1] = {4};
  DLTensor t{};
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  EXPECT_NE(message_of([&] { from_dlpack(t); }).find("not CUDA"), std::string::npos);
  t.device = {kDLCUDA, 0};
  t.dtype = {kDLFloat, 64, 1};
  EXPECT_NE(message_of([&] { from_dlpack(t); }).find("64 bits"), std::string::npos);
  t.dtype = {kDLFloat, 32, 1};
  t.byte_offset = 2;
  EXPECT_NE(message_of([&] { from_dlpack(t); }).find("not a multiple of the 4-byte element"),
            std::string::npos);
}

TEST(PublicApi, WithoutAGpuDeviceCallsSayWhatIsMissing) {
  if (gpu_available()) GTEST_SKIP() << "a GPU is present";
  std::string why;
  EXPECT_FALSE(gpu_available(&why));
  EXPECT_FALSE(why.empty());
  EXPECT_NE(message_of([] { compile(scale_shift()); }).find("no CUDA GPU"), std::string::npos);
  EXPECT_NE(message_of([] { DeviceArray a(f32, {4}); }), "<no user error>");
}

// ---------------------------------------------------------------------------------------------
// On a GPU.

TEST(GpuPublicApi, LaunchAgreesWithTheInterpreter) {
  HostTensor a(bf16, {777, 1001}), want(f32, {777, 1001});
  a.fill_random(11);
  interpret(scale_shift(), {a, want});
  CompiledKernel ck = compile(scale_shift());
  DeviceArray da = DeviceArray::from(a), db(f32, {777, 1001});
  db.fill_bytes(0xff);
  ck.launch({da, db});
  synchronize();
  HostTensor got = db.to_host();
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_EQ(got.get(i), want.get(i)) << "element " << i;
}

TEST(GpuPublicApi, TimeAndBandwidthAreMeasured) {
  CompiledKernel ck = compile(scale_shift());
  DeviceArray da(bf16, {4096, 4096}), db(f32, {4096, 4096});
  da.fill_bytes(0);
  TimeResult t = time(ck, {da, db}, {.runs = 5, .warmup = 1});
  EXPECT_EQ(t.samples_ms.size(), 5u);
  EXPECT_GT(t.median_ms, 0);
  EXPECT_LE(t.min_ms, t.median_ms);
  EXPECT_GT(measure_copy_bandwidth(size_t(256) << 20, 5), 100.0); // GB/s
  CompileTimes c = ck.prepare({da, db});
  EXPECT_TRUE(c.total() >= 0);
}

TEST(GpuPublicApi, DlpackRoundTripOwnsTheMemory) {
  DeviceArray a(f32, {16, 3});
  uint64_t p = a.tensor().ptr;
  DLManagedTensor* m = to_dlpack(std::move(a));
  EXPECT_EQ(reinterpret_cast<uint64_t>(m->dl_tensor.data), p);
  DeviceTensor v = from_dlpack(m->dl_tensor);
  EXPECT_EQ(v.shape, (std::vector<int64_t>{16, 3}));
  EXPECT_TRUE(v.contiguous());
  m->deleter(m);
}
