// cuBLASLt through dlopen: the entry-point table, availability, and CublasLtGemm.
//
// Row-major to column-major. cuBLASLt is column-major; a row-major [r, c] array with leading
// dimension c is, read column-major, its transpose: a [c, r] matrix with ld c. So instead of
// C = op(A) op(B) we ask cuBLASLt for C^T = op(B)^T op(A)^T, with m = N, n = M, k = K, and our B as
// its first operand:
//   layout  cuBLASLt "A" (our B)               cuBLASLt "B" (our A)
//   nn      B [K,N]  -> stored N x K, ld N, op N   A [M,K] -> stored K x M, ld K, op N
//   nt      B [N,K]  -> stored K x N, ld K, op T   A [M,K] -> stored K x M, ld K, op N
//   tn      B [K,N]  -> stored N x K, ld N, op N   A [K,M] -> stored M x K, ld M, op T
// and C [M,N] row-major is the column-major N x M result with ld N.
#include "ops/vendor/CublasLt.h"

#include <algorithm>
#include <cublasLt.h>
#include <fmt/format.h>

#include "runtime/Driver.h"
#include "runtime/DynamicLibrary.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace tp::ops {

namespace {

#define TILEPILOT_CUBLASLT_FUNCS(X)                                                                \
  X(cublasLtCreate)                                                                                \
  X(cublasLtDestroy)                                                                               \
  X(cublasLtGetVersion)                                                                            \
  X(cublasLtGetStatusName)                                                                         \
  X(cublasLtGetStatusString)                                                                       \
  X(cublasLtMatmulDescCreate)                                                                      \
  X(cublasLtMatmulDescDestroy)                                                                     \
  X(cublasLtMatmulDescSetAttribute)                                                                \
  X(cublasLtMatrixLayoutCreate)                                                                    \
  X(cublasLtMatrixLayoutDestroy)                                                                   \
  X(cublasLtMatmulPreferenceCreate)                                                                \
  X(cublasLtMatmulPreferenceDestroy)                                                               \
  X(cublasLtMatmulPreferenceSetAttribute)                                                          \
  X(cublasLtMatmulAlgoGetHeuristic)                                                                \
  X(cublasLtMatmulAlgoConfigGetAttribute)                                                          \
  X(cublasLtMatmul)

struct Api {
#define TILEPILOT_X(n) decltype(&::n) n = nullptr;
  TILEPILOT_CUBLASLT_FUNCS(TILEPILOT_X)
#undef TILEPILOT_X
  VendorLibrary library;
};

/// Opens the library and resolves every entry point; nullopt with the reason otherwise.
std::optional<Api> load_api(std::string* why_not) {
  std::string tried;
  auto lib = rt::open_library(
      rt::cuda_library_candidates({"libcublasLt.so.13", "libcublasLt.so.12"}), &tried);
  if (!lib) {
    if (why_not)
      *why_not = "cuBLASLt was not found (tried libcublasLt.so.13 and .so.12; set CUDA_HOME or "
                 "LD_LIBRARY_PATH to a CUDA toolkit's lib64):\n" +
                 tried;
    return std::nullopt;
  }
  Api api;
#define TILEPILOT_X(n)                                                                             \
  api.n = reinterpret_cast<decltype(api.n)>(lib->symbol(#n));                                      \
  if (!api.n) {                                                                                    \
    if (why_not) *why_not = lib->path + " has no entry point " #n "; it is too old (need 12.x+)";  \
    return std::nullopt;                                                                           \
  }
  TILEPILOT_CUBLASLT_FUNCS(TILEPILOT_X)
#undef TILEPILOT_X
  api.library = {"cuBLASLt", lib->path, api.cublasLtGetVersion()};
  return api;
}

/// The process-wide table, loaded once.
const Api* api(std::string* why_not) {
  static std::string why;
  static const std::optional<Api> a = load_api(&why);
  if (!a && why_not) *why_not = why;
  return a ? &*a : nullptr;
}

std::string status_text(const Api& a, cublasStatus_t s) {
  return fmt::format("{} ({})", a.cublasLtGetStatusName(s), a.cublasLtGetStatusString(s));
}

std::string problem_text(DType dtype, const std::string& layout, int64_t M, int64_t N, int64_t K) {
  return fmt::format("gemm {} {} M={} N={} K={}", dtype_name(dtype), layout, M, N, K);
}

/// The largest power of two (up to 256) dividing the address: what cuBLASLt may assume.
int alignment_of(CUdeviceptr p) {
  int a = 256;
  while (a > 1 && p % a)
    a /= 2;
  return a;
}

} // namespace

struct CublasLtGemm::Plan {
  const Api* api = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr; // cuBLASLt's A (our B), B, C
  cublasLtMatmulHeuristicResult_t choice{};
  ~Plan() {
    if (desc) api->cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t l : {a, b, c})
      if (l) api->cublasLtMatrixLayoutDestroy(l);
  }
};

std::optional<VendorLibrary> cublaslt_library(std::string* why_not) {
  const Api* a = api(why_not);
  if (!a) return std::nullopt;
  return a->library;
}

bool cublaslt_available(std::string* why_not) {
  if (!api(why_not)) return false;
  std::string why;
  if (rt::device_count(&why) == 0) {
    if (why_not) *why_not = "cuBLASLt was found, but there is no usable GPU: " + why;
    return false;
  }
  return true;
}

void validate_cublaslt_gemm(DType dtype, const std::string& layout, int64_t M, int64_t N,
                            int64_t K) {
  if (dtype != DType::bf16 && dtype != DType::f16)
    user_error() << "cuBLASLt gemm: dtype " << dtype_name(dtype)
                 << " is not supported; use bf16 or f16";
  if (layout != "nn" && layout != "nt" && layout != "tn")
    user_error() << "cuBLASLt gemm: layout '" << layout << "' is not supported; use nn, nt or tn";
  constexpr int64_t limit = int64_t(1) << 31;
  for (auto [name, v] : {std::pair{"M", M}, {"N", N}, {"K", K}})
    if (v <= 0 || v >= limit)
      user_error() << "cuBLASLt gemm: " << name << "=" << v << " must be in [1, 2^31)";
}

CublasLtGemm::CublasLtGemm() {
  std::string why;
  if (!cublaslt_available(&why)) user_error() << "cuBLASLt gemm cannot run: " << why;
  const Api& a = *api(nullptr);
  library_ = a.library;
  rt::ensure_context(); // cuBLASLt then works in our primary context
  cublasLtHandle_t h = nullptr;
  cublasStatus_t s = a.cublasLtCreate(&h);
  if (s != CUBLAS_STATUS_SUCCESS)
    user_error() << "cuBLASLt: cublasLtCreate failed with " << status_text(a, s) << " ("
                 << library_.describe() << ")";
  handle_ = h;
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (handle_) api(nullptr)->cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

CublasLtGemm::Plan& CublasLtGemm::plan(DType dtype, const std::string& layout, int64_t M, int64_t N,
                                       int64_t K, int alignment) {
  Key key{dtype, layout, M, N, K, alignment};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  const Api& a = *api(nullptr);
  auto check = [&](cublasStatus_t s, const char* call) {
    if (s != CUBLAS_STATUS_SUCCESS)
      user_error() << "cuBLASLt: " << call << " failed with " << status_text(a, s) << " for "
                   << problem_text(dtype, layout, M, N, K);
  };
  auto p = std::make_unique<Plan>();
  p->api = &a;
  cudaDataType_t t = dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  check(a.cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "cublasLtMatmulDescCreate");
  cublasOperation_t op_a = layout == "nt" ? CUBLAS_OP_T : CUBLAS_OP_N; // applies to our B
  cublasOperation_t op_b = layout == "tn" ? CUBLAS_OP_T : CUBLAS_OP_N; // applies to our A
  check(a.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a),
        "cublasLtMatmulDescSetAttribute(TRANSA)");
  check(a.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b),
        "cublasLtMatmulDescSetAttribute(TRANSB)");
  // Stored (pre-op) shapes, column-major; see the table at the top of this file.
  if (layout == "nt")
    check(a.cublasLtMatrixLayoutCreate(&p->a, t, K, N, K), "cublasLtMatrixLayoutCreate(B)");
  else
    check(a.cublasLtMatrixLayoutCreate(&p->a, t, N, K, N), "cublasLtMatrixLayoutCreate(B)");
  if (layout == "tn")
    check(a.cublasLtMatrixLayoutCreate(&p->b, t, M, K, M), "cublasLtMatrixLayoutCreate(A)");
  else
    check(a.cublasLtMatrixLayoutCreate(&p->b, t, K, M, K), "cublasLtMatrixLayoutCreate(A)");
  check(a.cublasLtMatrixLayoutCreate(&p->c, t, N, M, N), "cublasLtMatrixLayoutCreate(C)");

  cublasLtMatmulPreference_t pref = nullptr;
  check(a.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  struct PrefGuard {
    const Api& a;
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { a.cublasLtMatmulPreferenceDestroy(p); }
  } guard{a, pref};
  uint64_t ws = kWorkspaceBytes;
  uint32_t align = static_cast<uint32_t>(alignment);
  check(a.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                               sizeof ws),
        "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    check(a.cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align),
          "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");

  cublasLtMatmulHeuristicResult_t results[8] = {};
  int returned = 0;
  check(a.cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->a,
                                         p->b, p->c, p->c, pref, 8, results, &returned),
        "cublasLtMatmulAlgoGetHeuristic");
  int chosen = -1;
  for (int i = 0; i < returned && chosen < 0; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) chosen = i;
  if (chosen < 0)
    user_error() << "cuBLASLt: the heuristic found no algorithm for "
                 << problem_text(dtype, layout, M, N, K) << " with " << alignment
                 << "-byte aligned pointers (" << library_.describe() << ")";
  p->choice = results[chosen];
  return *(plans_[key] = std::move(p));
}

void CublasLtGemm::run(DType dtype, const std::string& layout, int64_t M, int64_t N, int64_t K,
                       CUdeviceptr A, CUdeviceptr B, CUdeviceptr C, CUstream stream) {
  validate_cublaslt_gemm(dtype, layout, M, N, K);
  if (!A || !B || !C)
    user_error() << "cuBLASLt gemm: null device pointer (A, B or C) for "
                 << problem_text(dtype, layout, M, N, K);
  int align = std::min({alignment_of(A), alignment_of(B), alignment_of(C)});
  if (align < 2)
    user_error() << "cuBLASLt gemm: A, B and C must be aligned to the 2-byte element size";
  Plan& p = plan(dtype, layout, M, N, K, align);
  const Api& a = *api(nullptr);
  if (workspace_.bytes() == 0) workspace_ = rt::DeviceBuffer(kWorkspaceBytes);
  float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t s = a.cublasLtMatmul(
      static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, reinterpret_cast<const void*>(B), p.a,
      reinterpret_cast<const void*>(A), p.b, &beta, reinterpret_cast<const void*>(C), p.c,
      reinterpret_cast<void*>(C), p.c, &p.choice.algo, reinterpret_cast<void*>(workspace_.ptr()),
      workspace_.bytes(), stream);
  if (s != CUBLAS_STATUS_SUCCESS)
    user_error() << "cuBLASLt: cublasLtMatmul failed with " << status_text(a, s) << " for "
                 << problem_text(dtype, layout, M, N, K) << " (" << library_.describe() << ")";
}

void CublasLtGemm::run(const Problem& p, CUdeviceptr A, CUdeviceptr B, CUdeviceptr C,
                       CUstream stream) {
  auto it = p.options.find("layout");
  run(p.dtype, it == p.options.end() ? "nn" : it->second, p.at("M"), p.at("N"), p.at("K"), A, B, C,
      stream);
}

std::string CublasLtGemm::algorithm(DType dtype, const std::string& layout, int64_t M, int64_t N,
                                    int64_t K) {
  validate_cublaslt_gemm(dtype, layout, M, N, K);
  Plan& p = plan(dtype, layout, M, N, K, 256);
  const Api& a = *api(nullptr);
  auto attr = [&](cublasLtMatmulAlgoConfigAttributes_t which) {
    uint32_t v = 0;
    size_t written = 0;
    a.cublasLtMatmulAlgoConfigGetAttribute(&p.choice.algo, which, &v, sizeof v, &written);
    return v;
  };
  return fmt::format("algo {}, tile id {}, stages id {}, workspace {} B, waves {:.2f}",
                     attr(CUBLASLT_ALGO_CONFIG_ID), attr(CUBLASLT_ALGO_CONFIG_TILE_ID),
                     attr(CUBLASLT_ALGO_CONFIG_STAGES_ID), p.choice.workspaceSize,
                     p.choice.wavesCount);
}

} // namespace tp::ops
