// Memory-bound user kernels at several tile configs, side by side in one process: the element-wise
// add, the GEMV and the transpose of examples/02, 06 and 03, each at aligned and odd shapes; the
// GEMV also with its loop pipelined, into fragments and into shared tiles.
// Prints, per kernel, config and shape: the median time (L2 flushed), TB/s counting each byte
// read once and written once, the share of the device-to-device copy bandwidth measured in the
// same run, and ptxas' registers. The results are not checked here (the lessons check them);
// this program only compares configs and code generation.
// Usage: bench_memory_bound [--quick]    (--quick: each lesson's own config only)
//        bench_memory_bound --only NAME     every config of the cases named NAME
//        bench_memory_bound --lanes NAME    the same, each element-wise or transpose config
//                                           also with the row_lanes annotation at 3, 1 and 2
//                                           (a warp's lanes move a row's runs together: loads
//                                           and stores, loads only, stores only) beside the
//                                           default 0
//        bench_memory_bound --resources NAME   ptxas' registers and spills of each (no GPU),
//                                           with --lanes' variants
//        bench_memory_bound --source NAME   the CUDA of the variant for unaligned rows (no TMA)
//                                           of every case named NAME (elementwise, transpose,
//                                           gemv) at its first config of each staging, or
//                                           of NAME:CONFIG only (a config as --only prints
//                                           it); no GPU needed
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <tilepilot/tilepilot.h>

using namespace tp;

namespace {

/// How the result goes out. `Store::plain`: `copy(c, C.tile(...))` with
/// annotate("staged_stores", "1"), which the compiler stages through a shared tile where C's rows
/// are not 16-byte aligned (StageUnalignedStores.h; off by default) and stores directly where
/// they are. `Store::staged`: the kernel itself copies fragment -> shared
/// -> global, and the compiler cuts the last copy into the destination's aligned 16-byte blocks
/// whatever the rows' alignment. `Store::direct`: annotate("staged_stores", "0"), the fragment's
/// runs stored directly, in narrower pieces where a row is not 16-byte aligned (the default).
/// `lanes`: the row_lanes annotation (0, the default, moves each run alone; 3 lets a warp's lanes
/// move a row's runs together, 1 for loads only, 2 for stores only).
enum class Store { plain, staged, direct };
const char* store_label(Store s) {
  return s == Store::staged ? ",staged" : s == Store::direct ? ",direct" : "";
}

Kernel scaled_add(int64_t bm, int64_t bn, int nthreads, Store store = Store::plain, int lanes = 0) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {M, N}, bf16), C("C", {M, N}, bf16);
  Tensor scale("scale", {1}, f32);
  return kernel("scaled_add", {A, B, scale, C}, grid(ceildiv(N, bn), ceildiv(M, bm)),
                threads(nthreads), [&](Var bx, Var by) {
                  annotate("row_lanes", std::to_string(lanes));
                  annotate("staged_stores", store == Store::direct ? "0" : "1");
                  Tile a = alloc_fragment({bm, bn}, bf16), b = alloc_fragment({bm, bn}, bf16);
                  Tile c = alloc_fragment({bm, bn}, bf16);
                  copy(A.tile(by * bm, bx * bn), a);
                  copy(B.tile(by * bm, bx * bn), b);
                  parallel({bm, bn}, [&](Var i, Var j) {
                    c(i, j) = (cast(f32, a(i, j)) + cast(f32, b(i, j))) * scale(0);
                  });
                  if (store != Store::staged) {
                    copy(c, C.tile(by * bm, bx * bn));
                    return;
                  }
                  Tile out = alloc_shared({bm, bn}, bf16);
                  copy(c, out);
                  copy(out, C.tile(by * bm, bx * bn));
                });
}

/// How the GEMV's loop over K gets its tiles: serial (each iteration waits for its own loads),
/// pipelined into fragments with copies = cp_async (the compiler stages them through shared
/// memory, StageFragmentLoads.h; lesson 06), or pipelined into shared tiles the kernel declares
/// (bf16, read in the loop).
enum class Loop { serial, fragments, shared };

// `dt`: the dtype the A and x fragments hold (the lesson uses f32).
Kernel gemv(int64_t bm, int64_t bk, int nthreads, DType dt, Loop loop = Loop::serial,
            int stages = 1) {
  Dim M("M"), K("K");
  Tensor A("A", {M, K}, bf16), X("x", {K}, bf16), Y("y", {M}, bf16);
  return kernel("gemv", {A, X, Y}, grid(ceildiv(M, bm)), threads(nthreads), [&](Var by) {
    const bool smem = loop == Loop::shared;
    Tile a = smem ? alloc_shared({bm, bk}, bf16) : alloc_fragment({bm, bk}, dt);
    Tile x = smem ? alloc_shared({bk}, bf16) : alloc_fragment({bk}, dt);
    Tile part = alloc_fragment({bm, bk}, f32), y = alloc_fragment({bm}, f32);
    clear(part);
    auto step = [&](Var k) {
      copy(A.tile(by * bm, k * bk), a);
      copy(X.tile(k * bk), x);
      parallel({bm, bk}, [&](Var i, Var j) {
        part(i, j) = part(i, j) + cast(f32, a(i, j)) * cast(f32, x(j));
      });
    };
    if (loop == Loop::serial)
      serial(ceildiv(K, bk), step);
    else if (loop == Loop::fragments)
      pipelined(ceildiv(K, bk), {.stages = stages, .copies = Schedule::Copies::cp_async}, step);
    else
      pipelined(ceildiv(K, bk), stages, step);
    reduce_sum(part, y, 1);
    copy(y, Y.tile(by * bm));
  });
}

/// `Store::staged`: the transposed tile is built in a second shared tile and copied out from
/// there (aligned 16-byte blocks of B's rows) instead of from a fragment; `Store::plain` and
/// `Store::direct` store the fragment as scaled_add does.
/// `linear`: the shared tiles as written (annotate("shared_swizzle", "0")), not swizzled for
/// the column reads (ChooseSharedSwizzles.h).
Kernel transpose(int64_t b, int nthreads, Store store = Store::plain, bool linear = false,
                 int lanes = 0) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {N, M}, bf16);
  return kernel("transpose", {A, B}, grid(ceildiv(N, b), ceildiv(M, b)), threads(nthreads),
                [&](Var bx, Var by) {
                  if (linear) annotate("shared_swizzle", "0");
                  annotate("row_lanes", std::to_string(lanes));
                  annotate("staged_stores", store == Store::direct ? "0" : "1");
                  Tile s = alloc_shared({b, b}, bf16);
                  copy(A.tile(by * b, bx * b), s);
                  if (store == Store::staged) {
                    Tile u = alloc_shared({b, b}, bf16);
                    parallel({b, b}, [&](Var i, Var j) { u(i, j) = s(j, i); });
                    copy(u, B.tile(bx * b, by * b));
                    return;
                  }
                  Tile t = alloc_fragment({b, b}, bf16);
                  parallel({b, b}, [&](Var i, Var j) { t(i, j) = s(j, i); });
                  copy(t, B.tile(bx * b, by * b));
                });
}

struct Case {
  std::string name, config;
  std::function<Kernel()> make;
  std::vector<std::pair<DType, std::vector<int64_t>>> tensors; // each parameter, in order
  double bytes;                                                // read once and written once
};

double copy_tbs = 0;

void run(const Case& c) {
  try {
    CompiledKernel ck = compile(c.make());
    std::vector<DeviceArray> arrays;
    std::vector<Arg> args;
    arrays.reserve(c.tensors.size());
    for (const auto& [dt, shape] : c.tensors) {
      arrays.emplace_back(dt, shape);
      arrays.back().fill_bytes(0x3c); // finite bf16 and f32 values
    }
    for (const DeviceArray& a : arrays)
      args.push_back(a);
    ck.launch(args);
    synchronize();
    TimeResult r = time(ck, args, {.runs = 20, .flush_l2 = true});
    double tbs = c.bytes / (r.median_ms * 1e-3) / 1e12;
    std::printf(
        "%-11s %-34s %-18s %8.4f ms %5.2f TB/s %4.0f %% of copy  %3d regs\n", c.name.c_str(),
        c.config.c_str(),
        (std::to_string(c.tensors[0].second[0]) + "x" + std::to_string(c.tensors[0].second.back()))
            .c_str(),
        r.median_ms, tbs, 100 * tbs / copy_tbs, ck.resources().registers);
  } catch (const std::exception& e) {
    std::printf("%-11s %-34s error: %s\n", c.name.c_str(), c.config.c_str(), e.what());
  }
  std::fflush(stdout);
}

std::string cfg(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  std::string s;
  for (const auto& [k, v] : kv)
    s += (s.empty() ? "" : ",") + std::string(k) + "=" + std::to_string(v);
  return s;
}

} // namespace

int main(int argc, char** argv) {
  const bool quick = argc == 2 && std::strcmp(argv[1], "--quick") == 0;
  const bool source = argc == 3 && std::strcmp(argv[1], "--source") == 0;
  const bool lanes = argc == 3 && std::strcmp(argv[1], "--lanes") == 0;
  const bool only = lanes || (argc == 3 && std::strcmp(argv[1], "--only") == 0);
  const bool resources = argc == 3 && std::strcmp(argv[1], "--resources") == 0;
  if (argc > 3 || (argc == 2 && !quick) || (argc == 3 && !source && !only && !resources)) {
    std::fprintf(stderr,
                 "usage: %s [--quick | --only NAME | --lanes NAME | --source NAME | --resources "
                 "NAME], NAME one "
                 "of elementwise, transpose, gemv\n",
                 argv[0]);
    return 2;
  }
  std::string why;
  if (!source && !resources && !gpu_available(&why)) {
    std::fprintf(stderr, "%s: needs a CUDA GPU: %s\n", argv[0], why.c_str());
    return 2;
  }
  if (!source && !resources) {
    copy_tbs = measure_copy_bandwidth() / 1e3;
    std::printf("device-to-device copy: %.2f TB/s\n", copy_tbs);
  }
  std::vector<Case> cases;
  struct TileConfig { // a tile's rows and columns (bm x bn, or bm x bk), and threads a block
    int64_t rows, cols;
    int threads;
  };
  std::vector<TileConfig> ew = {{32, 128, 128}};
  if (!quick)
    ew.insert(ew.end(), {{64, 128, 128},
                         {32, 256, 256},
                         {16, 256, 128},
                         {64, 256, 256},
                         {8, 512, 128},
                         {16, 512, 256},
                         {4, 1024, 128},
                         {8, 1024, 256}});
  // The row_lanes values each element-wise and transpose config runs with, and its label.
  const std::vector<int> lane_forms =
      lanes || resources || source ? std::vector<int>{0, 3, 1, 2} : std::vector<int>{0};
  auto lanes_label = [](int v) { return v == 0 ? std::string() : ",lanes=" + std::to_string(v); };
  for (auto [M, N] : {std::pair<int64_t, int64_t>{8191, 8193}, {8192, 8192}})
    for (const TileConfig& t : ew)
      for (Store store : {Store::plain, Store::staged, Store::direct})
        for (int lf : lane_forms)
          cases.push_back(
              {"elementwise",
               cfg({{"bm", t.rows}, {"bn", t.cols}, {"threads", t.threads}}) + store_label(store) +
                   lanes_label(lf),
               [t, store, lf] { return scaled_add(t.rows, t.cols, t.threads, store, lf); },
               {{bf16, {M, N}}, {bf16, {M, N}}, {f32, {1}}, {bf16, {M, N}}},
               double(M) * N * 6});
  std::vector<TileConfig> gv = {{16, 256, 256}};
  if (!quick)
    gv.insert(gv.end(),
              {{16, 512, 256}, {32, 256, 256}, {8, 512, 256}, {64, 128, 256}, {32, 512, 512}});
  struct LoopConfig {
    Loop loop;
    int stages;
    const char* name;
  };
  std::vector<LoopConfig> loops = {{Loop::serial, 1, "serial"}};
  if (!quick)
    loops.insert(loops.end(), {{Loop::fragments, 2, "fragments2"},
                               {Loop::fragments, 3, "fragments3"},
                               {Loop::shared, 2, "shared2"},
                               {Loop::shared, 3, "shared3"}});
  for (auto [M, K] : {std::pair<int64_t, int64_t>{16384, 8192}, {16383, 8191}})
    for (const TileConfig& t : gv)
      for (const LoopConfig& l : loops)
        for (DType dt : quick || l.loop == Loop::shared ? std::vector<DType>{f32}
                                                        : std::vector<DType>{f32, bf16})
          cases.push_back(
              {"gemv",
               cfg({{"bm", t.rows}, {"bk", t.cols}, {"threads", t.threads}}) +
                   (l.loop == Loop::shared || dt == bf16 ? ",bf16" : ",f32") + "," + l.name,
               [t, dt, l] { return gemv(t.rows, t.cols, t.threads, dt, l.loop, l.stages); },
               {{bf16, {M, K}}, {bf16, {K}}, {bf16, {M}}},
               double(M) * K * 2 + K * 2 + M * 2});
  std::vector<std::pair<int64_t, int>> tr = {{32, 128}, {64, 128}};
  if (!quick) tr.insert(tr.end(), {{64, 256}, {128, 256}});
  for (auto [M, N] : {std::pair<int64_t, int64_t>{8192, 8192}, {8191, 8193}})
    for (auto [b, th] : tr)
      for (Store store : {Store::plain, Store::staged, Store::direct})
        for (bool linear : {true, false})
          for (int lf : lane_forms)
            cases.push_back({"transpose",
                             cfg({{"b", b}, {"threads", th}}) + store_label(store) +
                                 (linear ? ",linear" : "") + lanes_label(lf),
                             [b = b, th = th, store, linear, lf] {
                               return transpose(b, th, store, linear, lf);
                             },
                             {{bf16, {M, N}}, {bf16, {N, M}}},
                             double(M) * N * 4});
  if (source) {
    // NAME:CONFIG shows that one config; NAME alone its first config of each staging.
    const std::string arg = argv[2];
    const size_t colon = arg.find(':');
    const std::string name = arg.substr(0, colon),
                      config = colon == std::string::npos ? "" : arg.substr(colon + 1);
    std::vector<std::string> shown;
    for (const Case& c : cases) {
      const std::string staging = c.config.find("staged") == std::string::npos ? "" : "staged";
      if (c.name != name || (!config.empty() && c.config != config) ||
          std::find(shown.begin(), shown.end(), staging) != shown.end())
        continue;
      shown.push_back(staging);
      std::printf("// %s %s\n%s\n", c.name.c_str(), c.config.c_str(),
                  compile(c.make(), {.arch = "sm_90a"}).source(false).c_str());
    }
    if (!shown.empty()) return 0;
    std::fprintf(stderr,
                 "%s: no case named %s; use elementwise, transpose or gemv, optionally with "
                 ":CONFIG as --resources prints it\n",
                 argv[0], argv[2]);
    return 2;
  }
  if (resources) {
    // ptxas' report of every config of the case for sm_90a (the aligned variant), no GPU.
    bool any = false;
    for (const Case& c : cases)
      if (c.name == argv[2]) {
        any = true;
        Resources r = compile(c.make(), {.arch = "sm_90a"}).resources();
        std::printf("%-11s %-34s %3d regs %5d spill bytes\n", c.name.c_str(), c.config.c_str(),
                    r.registers, r.spill_bytes);
      }
    if (any) return 0;
    std::fprintf(stderr, "%s: no case named %s; use elementwise, transpose or gemv\n", argv[0],
                 argv[2]);
    return 2;
  }
  for (const Case& c : cases)
    if (!only || c.name == argv[2]) run(c);
  return 0;
}
