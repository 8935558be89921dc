// The Operator interface: everything the commands, the tuner, the pilot and dispatch know about
// one operator, owned by the operator. Built-in operators live in src/ops/<name>/; a user's live
// in a plug-in (tilepilot/plugin.h). The layers above iterate over the registry and never name
// an operator: a new operator is one class and one registration.
//
// An operator's kernel arguments are its parameters in order: inputs, then outputs (outputs()
// says which). Host calls pass HostTensors, device calls DeviceTensors, in that same order.
// A call runs the operator's kernel program (Operator::program): one kernel for most
// operators, or several in order with intermediates between them (split-KV decoding).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tilepilot/device.h"
#include "tilepilot/lang.h"
#include "tilepilot/problem.h"
#include "tilepilot/tensor.h"

namespace tp::ops {

/// One tuning knob, defined once: what the tuner searches on an arch (`values`), what a config
/// may set (`min`..`max`, in steps of `multiple`), and what leaving it out means (`neutral`:
/// swizzle 0, cluster 1). A knob whose neutral value it does not accept (bm's 0) is required:
/// every config sets it.
/// check_config is the one check of all of this; Operator::validate adds only the rules
/// between knobs and the problem.
struct Knob {
  std::string name;
  std::vector<int64_t> values;
  std::string help;
  int64_t min = 0, max = 0; // both 0: exactly the values in `values`
  int64_t neutral = 0;
  int64_t multiple = 1; // with min..max: the value must be a multiple of this (threads: 32)
  /// The shape decides this knob, not the search: a tuning space takes the problem's default
  /// config's value for it (neutral where the default leaves it out) instead of `values`, unless
  /// `--space` names it. For a knob such as gemm's pad_k, which applies to some shapes only.
  bool from_default = false;
  bool accepts(int64_t v) const;
  bool required() const { return !accepts(neutral); }
};

/// One kernel argument's dtype and shape, before any memory exists.
struct ArgSpec {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};

/// A box of an output tensor: per dimension [min, min + extent).
struct Box {
  int tensor; // index into the kernel parameters
  std::vector<int64_t> min, extent;
};

/// One kernel launch of a call. args[i] says what the kernel's i-th tensor parameter is bound
/// to: j < n is the call's argument j (arg_specs order, n = arg_specs().size()), n + t is the
/// program's intermediate t.
struct KernelStep {
  Kernel kernel;
  std::vector<int> args;
};

/// What one call of an operator runs: its steps in order on one stream, and the buffers that
/// carry data between them. Intermediates are allocated by the runtime, not passed by the
/// caller; their contents are undefined when a call starts (the interpreter fills them with
/// NaN), so a step must write every element a later step reads. The last step writes the
/// outputs: the default grid and block_outputs are that step's, and a check on the interpreter
/// runs every block of the earlier steps and its sample of blocks of the last one.
struct KernelProgram {
  std::vector<KernelStep> steps;
  std::vector<ArgSpec> intermediates;
};

/// A config's cost before compiling, for pruning a tuning space. Zero means "not modelled":
/// the compiler's report after compiling is the ground truth either way.
struct Estimate {
  int64_t smem_bytes = 0;    // dynamic shared memory
  int64_t acc_regs = 0;      // fp32 registers per thread held by accumulators
  int64_t reg_budget = 0;    // the most acc_regs may be before the kernel spills
  int64_t live_regs = 0;     // registers that are surely live at once (checked against the
                             // block's share of the register file)
  int64_t block_threads = 0; // threads per block, any producer warps included
  std::string divisibility;  // why the tile does not divide over the arch's MMA units
};

/// The framework operator - what a user of the framework runs today - on device tensors. It is
/// both the baseline ours is timed against and the fallback dispatch runs.
class Framework {
public:
  virtual ~Framework() = default;
  /// "cuBLASLt 13.1.0", "cuDNN 9.14.0", "torch-equivalent unfused kernels".
  virtual std::string name() const = 0;
  /// Why a stand-in runs instead of the framework's own implementation ("cuDNN does not run
  /// D=48"); "" when it is the framework's own.
  virtual std::string note() const { return ""; }
  bool is_vendor() const { return note().empty(); }
  /// Enqueues the operator over `args` (the kernel's parameter order) on `stream` (a CUstream;
  /// null: the default stream). Outputs are written in their own dtype.
  virtual void run(const std::vector<DeviceTensor>& args, Stream stream) = 0;
};

struct FrameworkOptions {
  /// Libraries to treat as missing ("cuBLASLt", "cuDNN"): tests of the degraded paths.
  std::set<std::string> disabled_libraries;
  /// False: the stand-in even where the vendor library runs (to test that stand-in).
  bool allow_vendor = true;
  /// Reports a degraded path once per key (a library missing, a problem it refuses).
  std::function<void(const std::string& key, const std::string& line)> note;
};

class Operator {
public:
  virtual ~Operator() = default;

  // --- identity and problems -------------------------------------------------------------
  virtual std::string name() const = 0;
  virtual std::string summary() const = 0;
  /// Shape keys with their meaning, e.g. {"M", "rows of A and C"}.
  virtual std::vector<std::pair<std::string, std::string>> shape_keys() const = 0;
  /// Builds a validated problem from `key=value` pairs; user error naming the bad key.
  virtual Problem parse(const std::map<std::string, std::string>& kv, DType dtype) const = 0;
  /// The problem a call on tensors of these shapes and dtypes (parameter order) with these
  /// options means; user error naming the tensor that does not fit. Default: the operator
  /// cannot be dispatched from tensors.
  virtual Problem problem_for(const std::vector<std::vector<int64_t>>& shapes,
                              const std::vector<DType>& dtypes,
                              const std::map<std::string, std::string>& options) const;
  /// The problem a call on these inputs means when the outputs do not exist yet (Python's
  /// torch ops allocate them from arg_specs). Default: user error, as for problem_for.
  virtual Problem problem_from_inputs(const std::vector<std::vector<int64_t>>& shapes,
                                      const std::vector<DType>& dtypes,
                                      const std::map<std::string, std::string>& options) const;
  /// A representative problem's keys: what `tilepilot show` fills in where --shape leaves a
  /// key out (kernels are symbolic in their sizes, so any valid problem shows the same code).
  virtual std::map<std::string, std::string> example_shape() const { return {}; }
  /// A short label of the problem's variant for reports ("causal", "padded"); "none" default.
  virtual std::string variant_label(const Problem&) const { return "none"; }

  // --- knobs -----------------------------------------------------------------------------
  /// The knobs on `arch` ("cpu", "sm_80", "sm_90a"), each with the values the tuner searches
  /// there and the range a config may set. The interpreter's ("cpu") accept every config that
  /// some GPU arch accepts.
  virtual std::vector<Knob> knobs(const std::string& arch) const = 0;
  /// The config used when none is given, for `arch`.
  virtual Config default_config(const Problem& p, const std::string& arch) const = 0;
  /// User error when `c` is not valid for `p` beyond the knobs' own definitions (a tile that
  /// does not divide, threads that do not fit). Called by check_config after the knobs are
  /// known to be present and in range, so it may read every required knob.
  virtual void validate(const Problem& p, const Config& c) const = 0;

  // --- the kernel ------------------------------------------------------------------------
  /// The kernel of a one-kernel operator. An operator that overrides program() returns its
  /// last step's kernel here (the one that writes the outputs); nothing in TilePilot calls
  /// build() for it, every command and dispatch runs program().
  virtual Kernel build(const Problem& p, const Config& c) const = 0;
  /// The kernels a call runs. Default: one step, build(p, c) bound to the call's arguments in
  /// order, no intermediates. validate_program() is checked wherever a program is run.
  virtual KernelProgram program(const Problem& p, const Config& c) const;
  /// The kernel's arguments in parameter order.
  virtual std::vector<ArgSpec> arg_specs(const Problem& p) const = 0;
  /// Whether the call's argument `i` may be a strided device view (unit innermost stride,
  /// other strides any non-negative value) rather than a contiguous tensor: the kernel
  /// parameters it is bound to are declared strided, and the framework operator honours the
  /// view's strides too. validate_program checks the first half. Default: none may.
  virtual bool strided_arg(const Problem&, size_t /*i*/) const { return false; }
  /// Kernel arguments in parameter order: inputs random (seeded), outputs poisoned. Default:
  /// arg_specs() filled uniformly in [-1, 1); an operator overrides it where inputs need
  /// structure (lengths, positions, indices).
  virtual std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) const;
  /// Indices of the arguments that are outputs.
  virtual std::vector<int> outputs(const Problem& p) const = 0;
  /// The output boxes block (x, y, z) of the program's last step writes (Box::tensor: the
  /// call's argument index). Default: read from that kernel's writes
  /// (copies, fills and element stores into the outputs, evaluated for this block); user error
  /// when a write's position depends on loaded data, and the operator must then override it.
  virtual std::vector<Box> block_outputs(const Problem& p, const Config& c,
                                         const std::array<int64_t, 3>& block) const;
  /// The launch grid of the program's last step: by default that kernel's own grid with its
  /// Dims bound by the specs of what its parameters are bound to.
  virtual std::array<int64_t, 3> grid(const Problem& p, const Config& c) const;
  virtual double flops(const Problem& p) const = 0;
  /// Bytes the operator must move at least (inputs read once, outputs written once).
  virtual double min_bytes(const Problem& p) const = 0;
  /// Why `p` has no kernel for GPU arch `arch` although the interpreter runs it ("" when it
  /// has one): checked before anything is compiled.
  virtual std::string unsupported_on(const Problem&, const std::string& /*arch*/) const {
    return "";
  }

  // --- correctness -----------------------------------------------------------------------
  /// fp64 reference of output `box.tensor` over `box` (row-major within the box).
  virtual std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args,
                                        const Box& box) const = 0;
  /// Default tolerance for dtype (atol, rtol), before scaling by the reduction length.
  virtual std::pair<double, double> tolerance(DType t) const;
  /// Terms summed into one output element (GEMM: K), which the default f32 tolerance scales
  /// with (see default_tolerance in Check.h).
  virtual int64_t reduction_length(const Problem&) const { return 1; }
  /// An fp32 reference of the outputs on the GPU, written to `out_f32` (one f32 device tensor
  /// per output, in outputs() order), for checks too large for the fp64 one. False: none.
  virtual bool gpu_reference(const Problem&, const std::vector<DeviceTensor>& /*args*/,
                             const std::vector<DeviceTensor>& /*out_f32*/, Stream) const {
    return false;
  }

  // --- the framework operator ------------------------------------------------------------
  /// What the framework operator is called in reports and release manifests ("cuBLASLt").
  virtual std::string framework_name() const = 0;
  /// The framework operator for `p` on the current GPU. User error saying what is missing
  /// when none can run (no GPU, a dtype it does not take).
  virtual std::unique_ptr<Framework> framework(const Problem& p,
                                               const FrameworkOptions& o) const = 0;
  /// The framework operator on host tensors: by default the fp64 reference over every output
  /// box of the interpreter's default config, rounded once into the outputs' dtype.
  virtual void run_host_framework(const Problem& p, std::vector<HostTensor>& args) const;

  // --- tuning ----------------------------------------------------------------------------
  /// Shape keys that choose a different kernel rather than a size (a head dim, a mask flag):
  /// exact in tuning keys, and never borrowed across when a model shape takes a near config.
  virtual std::set<std::string> exact_keys() const { return {}; }
  /// The problem a tuning key is made of: by default `p`. An operator folds keys here that
  /// only matter together (grouped heads: H / Hkv) or not at all (per-batch lengths).
  virtual Problem tuning_problem(const Problem& p) const { return p; }
  /// Pre-compile cost of `c` on `arch`. Default: each step's kernel lowered for `arch` (no
  /// NVRTC): the largest shared memory and block size of any step, registers not modelled.
  virtual Estimate estimate(const Problem& p, const Config& c, const std::string& arch) const;
  /// Shape-aware preference among configs (higher is tried first); 0 when there is none.
  virtual double score(const Problem&, const Config&, int /*sm_count*/) const { return 0; }
};

/// User error naming the knob when `c` sets one `op` does not have on `arch` or a value
/// outside its range.
void validate_knobs(const Operator& op, const Config& c, const std::string& arch);
/// The one check of a config wherever one enters (a flag, a spec, a release, Python, the
/// tuner): its knobs exist on `arch` and are in range (validate_knobs), every required knob is
/// set, then the operator's own rules (Operator::validate). User error naming the first fault.
void check_config(const Operator& op, const Problem& p, const Config& c, const std::string& arch);
/// What a partial config means: the knobs of `given` over op's default for `p` on `arch`,
/// checked with check_config.
Config complete_config(const Operator& op, const Problem& p, const std::string& arch,
                       const Config& given);

/// The specs of step `s`'s parameters: the call's arguments (`call`, arg_specs order) and the
/// intermediates they are bound to.
std::vector<ArgSpec> step_arg_specs(const KernelProgram& prog, size_t s,
                                    const std::vector<ArgSpec>& call);
/// User error naming the operator and the step when `prog` is not a program of `op` for `p`:
/// no steps, a binding out of range, a kernel whose tensor parameters are not as many as its
/// bindings (or that takes scalars), a parameter whose dtype or rank (or constant extent)
/// differs from what it is bound to, or an output the last step does not take.
void validate_program(const Operator& op, const Problem& p, const KernelProgram& prog);
/// op.program(p, c), validated.
KernelProgram checked_program(const Operator& op, const Problem& p, const Config& c);

/// Adds `op` to the registry. User error when an operator of that name exists.
void register_operator(std::shared_ptr<const Operator> op, const std::string& origin = "");
/// The operator called `name`; user error listing the known ones.
const Operator& find_operator(const std::string& name);
/// Every registered operator: the built-in ones first, then plug-ins in load order.
std::vector<const Operator*> all_operators();
/// Where `name` comes from: "built-in" or the plug-in's path.
std::string operator_origin(const std::string& name);

} // namespace tp::ops
