// Grouped GEMM, a mixture of experts' expert projections: C[r, :] = A[r, :] op(B[e]) for the
// rows r of expert e. A [R, K] holds the tokens stacked by expert, expert e owning rows
// [offs[e - 1], offs[e]) (offs[-1] = 0), C is [R, N]. offs [E] i32 are the cumulative row ends
// (torch._grouped_mm's `offs`), a run-time input: experts may be empty. B is [E, N, K] in
// layout nt (each expert's weight as torch.nn.Linear stores it, the default) or [E, K, N] in
// layout nn. bf16/f16 in and out, f32 accumulation. Rows past offs[E - 1] are not written.
// The kernel, parsing, inputs and fp64 reference; GroupedGemmOp wraps them as an Operator.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ops/Operator.h"

namespace tp::ops::grouped_gemm {

/// The kernel unrolls its tile scan over the experts (see GroupedGemm.cpp): E is bounded.
inline constexpr int64_t kMaxExperts = 256;

/// Keys E, R, N, K, layout (nt|nn), counts (E colon-separated row counts summing to R, or
/// "runtime" for a problem made from tensors). User error naming the key.
Problem parse(const std::map<std::string, std::string>& kv, DType dtype);
/// The problem's row count per expert: its `counts`, else (absent or "runtime") a ragged
/// routing drawn once from (E, R) with some experts empty; the same on every call.
std::vector<int64_t> counts(const Problem& p);
Config default_config(const Problem& p, const std::string& arch);
/// The rules between knobs (multiples of 16, threads a multiple of 32).
void validate(const Problem& p, const Config& c);
/// Parameters A, B, offs, C; R, N, K bound at launch, E compiled in.
Kernel build(const Problem& p, const Config& c);
std::vector<ArgSpec> arg_specs(const Problem& p);
/// A and the weights of the experts with rows uniform in [-1, 1) (seeded), the weights of
/// empty experts NaN (no kernel may read them), offs from counts(p), C poisoned.
std::vector<HostTensor> make_args(const Problem& p, uint64_t seed);

/// One bm-row tile of one expert: the rows [row0, row_end) it computes.
struct RowTile {
  int64_t expert, row0, row_end;
};
/// The kernel's tile list for these counts, in block order: expert by expert, bm rows a tile.
std::vector<RowTile> row_tiles(const std::vector<int64_t>& counts, int64_t bm);
/// Grid rows: a bound on the tiles any counts summing to R make (blocks past the list exit).
int64_t max_tiles(int64_t E, int64_t R, int64_t bm);

/// fp64 C over rows [r0, r0 + nr) x columns [c0, c0 + nc), the experts read from args' offs.
/// Rows past offs[E - 1] are NaN: no expert owns them.
std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args, int64_t r0,
                              int64_t nr, int64_t c0, int64_t nc);
/// offs read from a tensor: user error unless non-decreasing, within [0, R].
std::vector<int64_t> offsets_of(const HostTensor& offs, int64_t R);

inline constexpr const char* kFrameworkName = "cuBLASLt, one GEMM per expert";
/// cuBLASLt per non-empty expert (counts read back to the host); where cuBLASLt cannot run,
/// the fp32 GPU reference per expert, saying so in its note.
std::unique_ptr<Framework> make_framework(const Problem& p, const FrameworkOptions& o);
/// The same loop over the fp32 GPU reference, into f32 outputs: Operator::gpu_reference.
void gpu_reference(const Problem& p, const std::vector<DeviceTensor>& args,
                   const DeviceTensor& out_f32, Stream s);

} // namespace tp::ops::grouped_gemm
