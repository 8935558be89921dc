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
  for (size_t i = 0; i < k->grid.size(); ++i)
    g[i] = ir::eval_int(k->grid[i], env);
  return g;
}

void interpret(const Kernel& k, const std::vector<HostTensor*>& args,
               const InterpretOptions& opts) {
  const ir::KernelNode& kn = k.node();
  if (!kn.scalars.empty())
    user_error() << "kernel '" << kn.name << "' has scalar parameters; pass them with the "
                 << "interpreter's Arg list (tp::interpret takes numbers for them)";
  std::vector<Arg> a;
  for (HostTensor* t : args) {
    Arg arg;
    arg.tensor = t;
    a.push_back(std::move(arg));
  }
  interpret_args(k, a, opts);
}

void interpret_args(const Kernel& k, const std::vector<Arg>& all_args,
                    const InterpretOptions& opts) {
  const ir::KernelNode& kn = k.node();
  std::vector<ir::ParamRef> order = kn.launch_order();
  if (all_args.size() != order.size())
    user_error() << "kernel '" << kn.name << "' takes " << order.size()
                 << (kn.scalars.empty() ? " tensors" : " arguments") << ", got " << all_args.size();
  std::vector<const Arg*> args(kn.params.size());
  std::vector<double> scalars(kn.scalars.size());
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i].scalar) {
      double v = all_args[i].scalar;
      scalars[order[i].index] =
          kn.scalars[order[i].index].dtype() == DType::f32 ? round_to(DType::f32, v) : v;
    } else {
      internal_assert(all_args[i].tensor) << "null tensor argument";
      args[order[i].index] = &all_args[i];
    }
  }
  std::vector<ir::ArgDesc> desc;
  for (const Arg* a : args)
    desc.push_back(a->view ? ir::ArgDesc{a->tensor->dtype(), a->shape, a->strides}
                           : ir::ArgDesc{a->tensor->dtype(), a->tensor->shape()});
  ir::Binding env = ir::bind_args(kn, desc);
  ir::bind_scalars(kn, scalars, env);
  // Element e (row-major) of argument i's view -> its flat index in the tensor's storage.
  std::vector<std::vector<int64_t>> view_index(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i]->view) continue;
    const std::vector<int64_t>& sh = desc[i].shape;
    std::vector<int64_t> st = ir::element_strides(desc[i]);
    int64_t n = 1;
    for (int64_t e : sh)
      n *= e;
    std::vector<int64_t>& ix = view_index[i];
    ix.resize(n);
    for (int64_t e = 0; e < n; ++e) {
      int64_t off = args[i]->offset, rest = e;
      for (int d = static_cast<int>(sh.size()) - 1; d >= 0; --d) {
        off += (rest % sh[d]) * st[d];
        rest /= sh[d];
      }
      if (off < 0 || off >= args[i]->tensor->numel())
        user_error() << "kernel '" << kn.name << "': the view passed for tensor '"
                     << kn.params[i]->name << "' (offset " << args[i]->offset
                     << ") reaches element " << off << " of a tensor of "
                     << args[i]->tensor->numel() << " elements";
      ix[e] = off;
    }
  }

  CompileEnv cenv;
  cenv.print_out = opts.print_out;
  std::vector<int> param_slots, dim_slots, block_slots, scalar_slots;
  for (const ir::Buffer& p : kn.params)
    param_slots.push_back(cenv.lay.buffer(p));
  for (const Var& d : kn.dims)
    dim_slots.push_back(cenv.lay.var(ir::as<ir::Variable>(d)->uid));
  for (const Var& v : kn.scalars)
    scalar_slots.push_back(cenv.lay.var(ir::as<ir::Variable>(v)->uid));
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
        for (int64_t x = 0; x < g[0]; ++x)
          blocks.push_back({x, y, z});
  for (const auto& b : blocks)
    for (int i = 0; i < 3; ++i)
      if (b[i] < 0 || b[i] >= g[i])
        user_error() << "block (" << b[0] << ", " << b[1] << ", " << b[2]
                     << ") is outside the grid (" << g[0] << ", " << g[1] << ", " << g[2] << ")";

  // Decode tensors once into exact doubles (a view is gathered into its own dense storage).
  std::vector<Storage> globals(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const HostTensor& t = *args[i]->tensor;
    globals[i].init(kn.params[i]->name, t.dtype(), desc[i].shape);
    if (args[i]->view)
      for (size_t e = 0; e < view_index[i].size(); ++e)
        globals[i].data[e] = t.get(view_index[i][e]);
    else
      for (int64_t e = 0; e < t.numel(); ++e)
        globals[i].data[e] = t.get(e);
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
    for (size_t i = 0; i < args.size(); ++i)
      c->buf[param_slots[i]] = &globals[i];
    for (size_t i = 0; i < dim_slots.size(); ++i)
      c->scalar[dim_slots[i]] = static_cast<double>(env.at(ir::as<ir::Variable>(kn.dims[i])->uid));
    for (size_t i = 0; i < scalar_slots.size(); ++i)
      c->scalar[scalar_slots[i]] = scalars[i];
    return c;
  };

  int nthreads = opts.threads > 0
                     ? opts.threads
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
    for (int t = 0; t < nthreads; ++t)
      pool.emplace_back(worker);
    for (auto& t : pool)
      t.join();
  }
  if (first_error) std::rethrow_exception(first_error);

  for (size_t i = 0; i < args.size(); ++i) {
    if (!written.count(kn.params[i]->uid)) continue;
    HostTensor& t = *args[i]->tensor;
    if (args[i]->view)
      for (size_t e = 0; e < view_index[i].size(); ++e)
        t.set(view_index[i][e], globals[i].data[e]);
    else
      for (int64_t e = 0; e < t.numel(); ++e)
        t.set(e, globals[i].data[e]);
  }
}

} // namespace tp::cpu
