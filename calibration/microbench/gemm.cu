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
    cublasStatus_t mb_st_ = (call);                                                                     \
    if (mb_st_ != CUBLAS_STATUS_SUCCESS)                                                                \
      throw ::mb::Failure(std::string(#call) + ": cublasLt status " + std::to_string(mb_st_) + " at " + \
                          __FILE__ + ":" + std::to_string(__LINE__));                                   \
  } while (0)

// The (N, K) pairs of the linear layers of three dense architectures at tensor parallelism 1..8:
// fused QKV, output projection, fused gate/up, down. Model-free in the sense that they are shapes,
// not weights; the fit interpolates between them by weight size.
struct Arch {
  int hidden, heads, kv_heads, head_dim, inter;
};
constexpr Arch kArchs[] = {
    {4096, 32, 8, 128, 14336},   // Llama-3-8B / Mistral-7B / Mixtral experts
    {5120, 40, 40, 128, 13824},  // a 13B MHA model
    {8192, 64, 8, 128, 28672},   // Llama-2/3-70B
};

std::vector<std::pair<int, int>> weight_shapes(bool quick) {
  std::vector<std::pair<int, int>> nk;
  for (const Arch& a : kArchs) {
    for (int tp : {1, 2, 4, 8}) {
      if (quick && tp != 1 && tp != 8) continue;
      const int q = a.heads * a.head_dim / tp;
      const int kv = (a.kv_heads >= tp ? a.kv_heads / tp : 1) * a.head_dim;
      nk.push_back({q + 2 * kv, a.hidden});         // QKV
      nk.push_back({a.hidden, q});                  // O
      nk.push_back({2 * a.inter / tp, a.hidden});   // gate+up
      nk.push_back({a.hidden, a.inter / tp});       // down
    }
    if (quick) break;
  }
  return nk;
}

std::vector<int> row_counts(bool quick) {
  if (quick) return {1, 16, 256, 4096};
  std::vector<int> m;
  for (int v = 1; v <= 16384; v *= 2) m.push_back(v);
  return m;
}

struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~LtPlan() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
  }
};

// Column-major view: Y^T (n x m) = W (stored k x n, transposed) x X^T (k x m).
std::unique_ptr<LtPlan> plan(cublasLtHandle_t lt, bool fp8, int m, int n, int k, size_t workspace) {
  auto p = std::make_unique<LtPlan>();
  const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  MB_LT(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, nop = CUBLAS_OP_N;
  MB_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  MB_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &nop, sizeof nop));
  MB_LT(cublasLtMatrixLayoutCreate(&p->a, in, k, n, k));
  MB_LT(cublasLtMatrixLayoutCreate(&p->b, in, k, m, k));
  MB_LT(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_16BF, n, m, n));
  cublasLtMatmulPreference_t pref = nullptr;
  MB_LT(cublasLtMatmulPreferenceCreate(&pref));
  MB_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                             sizeof workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw Failure("cuBLASLt has no algorithm for " + std::string(fp8 ? "fp8" : "bf16") + " m=" + std::to_string(m) +
                  " n=" + std::to_string(n) + " k=" + std::to_string(k));
  p->algo = result.algo;
  return p;
}

void run_dtype(const Options& o, const cudaDeviceProp& prop, bool fp8, CsvOut& out) {
  cublasLtHandle_t lt = nullptr;
  MB_LT(cublasLtCreate(&lt));
  std::unique_ptr<cublasLtContext, decltype(&cublasLtDestroy)> guard(lt, &cublasLtDestroy);
  cudaStream_t stream = nullptr;
  MB_CUDA(cudaStreamCreate(&stream));
  const size_t workspace_bytes = size_t{32} << 20;
  DeviceBuffer<char> workspace(workspace_bytes);
  const size_t elem = fp8 ? 1 : 2;
  const std::vector<int> ms = row_counts(o.quick);
  const int max_m = ms.back();
  for (const auto& [n, k] : weight_shapes(o.quick)) {
    const size_t w_bytes = static_cast<size_t>(n) * k * elem;
    const int copies = rotation_count(w_bytes, prop.l2CacheSize);
    DeviceBuffer<char> w(w_bytes * copies);
    DeviceBuffer<char> x(static_cast<size_t>(max_m) * k * elem);
    DeviceBuffer<__nv_bfloat16> y(static_cast<size_t>(max_m) * n);
    if (fp8) {
      fill_random_fp8(w.ptr, w_bytes * copies, 1, stream);
      fill_random_fp8(x.ptr, static_cast<size_t>(max_m) * k, 2, stream);
    } else {
      fill_random_bf16(w.ptr, w_bytes * copies / 2, 1, stream);
      fill_random_bf16(x.ptr, static_cast<size_t>(max_m) * k, 2, stream);
    }
    for (int m : ms) {
      const auto p = plan(lt, fp8, m, n, k, workspace_bytes);
      const float alpha = 1.0f, beta = 0.0f;
      int call = 0;
      auto op = [&] {
        const char* wp = w.ptr + (call++ % copies) * w_bytes;
        MB_LT(cublasLtMatmul(lt, p->desc, &alpha, wp, p->a, x.ptr, p->b, &beta, y.ptr, p->c, y.ptr, p->c, &p->algo,
                             workspace.ptr, workspace_bytes, stream));
      };
      // A first estimate sizes the repetitions.
      const double probe = time_median(stream, 3, op);
      const double seconds = time_median(stream, reps_for(o, probe), op);
      out.row(fp8 ? "fp8" : "bf16", m, n, k, seconds, reps_for(o, probe));
    }
  }
  MB_CUDA(cudaStreamDestroy(stream));
}

}  // namespace

void run_gemm(const Options& o, const cudaDeviceProp& prop) {
  CsvOut out(o.out_dir, servesim::calibration::raw::kGemmFile, servesim::calibration::raw::kGemmHeader);
  run_dtype(o, prop, false, out);
  const bool has_fp8 = prop.major > 8 || (prop.major == 8 && prop.minor >= 9);
  if (!has_fp8) return;
  try {
    run_dtype(o, prop, true, out);
  } catch (const Failure& e) {
    // fp8 GEMMs are optional: a missing algorithm leaves the 16-bit table, which fp8 models fall back on.
    std::cerr << " (fp8 GEMMs skipped: " << e.what() << ")";
  }
}

}  // namespace mb
