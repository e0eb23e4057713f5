// GEMMs of the shapes serving steps produce, through cuBLASLt: Y[m, n] = X[m, k] W[n, k]^T, the
// weight stored [out, in] as a linear layer keeps it. bf16, and fp8 (e4m3, W8A8, bf16 output) on
// GPUs with fp8 tensor cores (compute capability 8.9 and up).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <iostream>
#include <memory>

#include "common.cuh"

namespace mb {
namespace {

#define MB_LT(call)                                                                                     \
  do {                                                                                                  \
    const cublasStatus_t mb_st_ = (call);                                                               \
    if (mb_st_ != CUBLAS_STATUS_SUCCESS) ::mb::fail(#call, cublasLtGetStatusString(mb_st_), __FILE__, __LINE__); \
  } while (0)

#define MB_LT_NOTHROW(call)                                                                             \
  do {                                                                                                  \
    const cublasStatus_t mb_st_ = (call);                                                               \
    if (mb_st_ != CUBLAS_STATUS_SUCCESS)                                                                \
      ::mb::fail_in_cleanup(#call, cublasLtGetStatusString(mb_st_), __FILE__, __LINE__);              \
  } while (0)

struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (desc) MB_LT_NOTHROW(cublasLtMatmulDescDestroy(desc));
    if (a) MB_LT_NOTHROW(cublasLtMatrixLayoutDestroy(a));
    if (b) MB_LT_NOTHROW(cublasLtMatrixLayoutDestroy(b));
    if (c) MB_LT_NOTHROW(cublasLtMatrixLayoutDestroy(c));
  }
};

class LtHandle {
 public:
  LtHandle() { MB_LT(cublasLtCreate(&h_)); }
  ~LtHandle() {
    if (h_) MB_LT_NOTHROW(cublasLtDestroy(h_));
  }
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  operator cublasLtHandle_t() const { return h_; }

 private:
  cublasLtHandle_t h_ = nullptr;
};

class LtPreference {
 public:
  LtPreference() { MB_LT(cublasLtMatmulPreferenceCreate(&p_)); }
  ~LtPreference() {
    if (p_) MB_LT_NOTHROW(cublasLtMatmulPreferenceDestroy(p_));
  }
  LtPreference(const LtPreference&) = delete;
  LtPreference& operator=(const LtPreference&) = delete;
  operator cublasLtMatmulPreference_t() const { return p_; }

 private:
  cublasLtMatmulPreference_t p_ = nullptr;
};

// Column-major view: Y^T (n x m) = W (stored k x n, transposed) x X^T (k x m).
std::unique_ptr<LtPlan> make_plan(cublasLtHandle_t lt, bool fp8, int m, int n, int k, size_t workspace) {
  auto p = std::make_unique<LtPlan>();
  const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  MB_LT(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, nop = CUBLAS_OP_N;
  MB_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  MB_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &nop, sizeof nop));
  MB_LT(cublasLtMatrixLayoutCreate(&p->a, in, k, n, k));
  MB_LT(cublasLtMatrixLayoutCreate(&p->b, in, k, m, k));
  MB_LT(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_16BF, n, m, n));
  LtPreference pref;
  MB_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                             sizeof workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  MB_LT(cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found));
  if (found == 0)
    throw Failure("cuBLASLt has no algorithm for " + std::string(fp8 ? "fp8" : "bf16") + " m=" + std::to_string(m) +
                  " n=" + std::to_string(n) + " k=" + std::to_string(k));
  p->algo = result.algo;
  return p;
}

void run_dtype(const Options& o, bool fp8, CsvOut& out) {
  LtHandle lt;
  Stream stream;
  int device = 0;
  MB_CUDA(cudaGetDevice(&device));
  const size_t l2 = l2_bytes(device);
  const size_t workspace_bytes = size_t{32} << 20;
  DeviceBuffer<char> workspace(workspace_bytes);
  const size_t elem = fp8 ? 1 : 2;
  const std::vector<int> ms = plan::gemm_rows(o.quick);
  const int max_m = ms.back();
  for (const auto& [n, k] : plan::gemm_weight_shapes(o.quick)) {
    // Weights rotate (planning.h): a serving step streams each layer's weights from HBM, so small
    // weight matrices must not be timed from L2. Activations do not: the previous kernel has just
    // written them, in serving as here.
    const size_t w_bytes = static_cast<size_t>(n) * k * elem;
    const plan::Rotation r = plan::plan_rotation({w_bytes}, l2, rotation_budget());
    if (!r.fits) {
      std::cerr << " (" << n << " x " << k << " skipped: its rotation needs " << (r.arena_bytes() >> 20) << " MiB)";
      continue;
    }
    DeviceBuffer<char> w(r.arena_bytes());
    DeviceBuffer<char> x(static_cast<size_t>(max_m) * k * elem);
    DeviceBuffer<__nv_bfloat16> y(static_cast<size_t>(max_m) * n);
    if (fp8) {
      fill_random_fp8(w.ptr, r.arena_bytes(), 1, stream);
      fill_random_fp8(x.ptr, static_cast<size_t>(max_m) * k, 2, stream);
    } else {
      fill_random_bf16(w.ptr, r.arena_bytes() / 2, 1, stream);
      fill_random_bf16(x.ptr, static_cast<size_t>(max_m) * k, 2, stream);
    }
    for (int m : ms) {
      const auto p = make_plan(lt, fp8, m, n, k, workspace_bytes);
      const float alpha = 1.0f, beta = 0.0f;
      uint64_t call = 0;
      auto op = [&] {
        const char* wp = w.ptr + r.offset(0, call++);
        MB_LT(cublasLtMatmul(lt, p->desc, &alpha, wp, p->a, x.ptr, p->b, &beta, y.ptr, p->c, y.ptr, p->c, &p->algo,
                             workspace.ptr, workspace_bytes, stream));
      };
      // A first estimate sizes the repetitions; each timing starts after a whole rotation.
      const double probe = time_median(stream, 3, op, r.copies);
      const int reps = reps_for(o, probe);
      const double seconds = time_median(stream, reps, op, r.copies);
      out.row(fp8 ? "fp8" : "bf16", m, n, k, seconds, reps);
    }
  }
}

}  // namespace

void run_gemm(const Options& o, const cudaDeviceProp& prop) {
  CsvOut out(o.out_dir, servesim::calibration::raw::kGemmFile, servesim::calibration::raw::kGemmHeader);
  run_dtype(o, false, out);
  const bool has_fp8 = prop.major > 8 || (prop.major == 8 && prop.minor >= 9);
  if (!has_fp8) return;
  try {
    run_dtype(o, true, out);
  } catch (const Failure& e) {
    // fp8 GEMMs are optional: a missing algorithm leaves the 16-bit table, which fp8 models fall back on.
    std::cerr << " (fp8 GEMMs skipped: " << e.what() << ")";
  }
}

}  // namespace mb
