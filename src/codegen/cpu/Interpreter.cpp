// Interpreter driver: compiles the kernel once, binds and decodes the arguments, runs the
// blocks on worker threads (serially when the kernel has atomics, so sums are reproducible),
// and encodes written tensors back into their dtype.
#include "codegen/cpu/Interpreter.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "codegen/cpu/Statements.h"
#include "ir/ArgBinding.h"
#include "ir/IRVisitor.h"

namespace tp::cpu {

namespace {

std::vector<ir::ArgDesc> describe(const std::vector<HostTensor*>& args) {
  std::vector<ir::ArgDesc> out;
  for (const HostTensor* t : args) {
    internal_assert(t) << "null tensor argument";
    out.push_back({t->dtype(), t->shape()});
  }
  return out;
}

/// Global tensors the kernel writes, and whether it uses atomics.
void scan_writes(const ir::Stmt& body, std::set<uint64_t>* written, bool* atomics) {
  ir::for_each_stmt(body, [&](const ir::Stmt& s) {
    if (const auto* st = ir::as<ir::Store>(s)) written->insert(st->buffer->uid);
    if (const auto* c = ir::as<ir::Copy>(s)) written->insert(c->dst.buffer->uid);
    if (const auto* a = ir::as<ir::AtomicAdd>(s)) {
      written->insert(a->buffer->uid);
      *atomics = true;
    }
    if (const auto* f = ir::as<ir::Fill>(s)) written->insert(f->dst.buffer->uid);
  });
}

} // namespace

std::array<int64_t, 3> grid_extent(const Kernel& k, const std::vector<HostTensor*>& args) {
  ir::Binding env = ir::bind_args(k.node(), describe(args));
  std::array<int64_t, 3> g{1, 1, 1};
  for (size_t i = 0; i < k->grid.size(); ++i) g[i] = ir::eval_int(k->grid[i], env);
  return g;
}

void interpret(const Kernel& k, const std::vector<HostTensor*>& args,
               const InterpretOptions& opts) {
  const ir::KernelNode& kn = k.node();
  ir::Binding env = ir::bind_args(kn, describe(args));

  CompileEnv cenv;
  cenv.print_out = opts.print_out;
  std::vector<int> param_slots, dim_slots, block_slots;
  for (const ir::Buffer& p : kn.params) param_slots.push_back(cenv.lay.buffer(p));
  for (const Var& d : kn.dims) dim_slots.push_back(cenv.lay.var(ir::as<ir::Variable>(d)->uid));
  for (const Var& b : kn.block_vars)
    block_slots.push_back(cenv.lay.var(ir::as<ir::Variable>(b)->uid));
  std::unique_ptr<CStmt> prog = compile_stmt(kn.body, cenv);

  std::array<int64_t, 3> g{1, 1, 1};
  for (size_t i = 0; i < kn.grid.size(); ++i) {
    g[i] = ir::eval_int(kn.grid[i], env);
    if (g[i] <= 0)
      user_error(kn.loc) << "kernel '" << kn.name << "': grid dimension " << i << " is " << g[i]
                         << " for these shapes; every grid extent must be positive";
  }
  std::vector<std::array<int64_t, 3>> blocks = opts.blocks;
  if (blocks.empty())
    for (int64_t z = 0; z < g[2]; ++z)
      for (int64_t y = 0; y < g[1]; ++y)
        for (int64_t x = 0; x < g[0]; ++x) blocks.push_back({x, y, z});
  for (const auto& b : blocks)
    for (int i = 0; i < 3; ++i)
      if (b[i] < 0 || b[i] >= g[i])
        user_error() << "block (" << b[0] << ", " << b[1] << ", " << b[2]
                     << ") is outside the grid (" << g[0] << ", " << g[1] << ", " << g[2] << ")";

  // Decode tensors once into exact doubles.
  std::vector<Storage> globals(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    globals[i].init(kn.params[i]->name, args[i]->dtype(), args[i]->shape());
    for (int64_t e = 0; e < args[i]->numel(); ++e) globals[i].data[e] = args[i]->get(e);
  }
  std::set<uint64_t> written;
  bool atomics = false;
  scan_writes(kn.body, &written, &atomics);

  size_t nslots_var = cenv.lay.var_slot.size();
  size_t nslots_buf = cenv.lay.buffers.size();
  auto make_ctx = [&]() {
    auto c = std::make_unique<Ctx>();
    c->scalar.assign(nslots_var, 0.0);
    c->lane.assign(nslots_var, nullptr);
    c->scratch.resize(cenv.lay.num_exprs);
    c->buf.assign(nslots_buf, nullptr);
    c->owned.resize(nslots_buf);
    for (size_t i = 0; i < args.size(); ++i) c->buf[param_slots[i]] = &globals[i];
    for (size_t i = 0; i < dim_slots.size(); ++i)
      c->scalar[dim_slots[i]] = static_cast<double>(env.at(ir::as<ir::Variable>(kn.dims[i])->uid));
    return c;
  };

  int nthreads = opts.threads > 0 ? opts.threads
                                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (atomics) nthreads = 1;
  nthreads = static_cast<int>(std::min<size_t>(nthreads, blocks.size()));
  std::atomic<size_t> next{0};
  std::exception_ptr first_error;
  std::mutex err_m;
  auto worker = [&]() {
    auto c = make_ctx();
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= blocks.size()) return;
      for (size_t d = 0; d < block_slots.size(); ++d)
        c->scalar[block_slots[d]] = static_cast<double>(blocks[i][d]);
      try {
        prog->exec(*c);
      } catch (...) {
        std::lock_guard<std::mutex> l(err_m);
        if (!first_error) first_error = std::current_exception();
        next = blocks.size();
        return;
      }
    }
  };
  if (nthreads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < nthreads; ++t) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
  }
  if (first_error) std::rethrow_exception(first_error);

  for (size_t i = 0; i < args.size(); ++i) {
    if (!written.count(kn.params[i]->uid)) continue;
    for (int64_t e = 0; e < args[i]->numel(); ++e) args[i]->set(e, globals[i].data[e]);
  }
}

} // namespace tp::cpu
