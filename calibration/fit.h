#pragma once
// Turning measurements into calibration profiles. Three sources:
// - measured operator tables (Vidur format): GEMM, elementwise, all-reduce and send/recv;
// - the project's CUDA microbenchmarks' raw samples (microbench_samples.h);
// - a serving engine's step latencies, which fit engine overheads on top of a base profile.

#include <map>
#include <string>
#include <vector>

#include "calibration/operator_csv.h"
#include "calibration/step_latency_csv.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/gpu_spec.h"

namespace servesim::calibration {

// One measured GEMM, per GPU.
struct GemmSample {
  double rows = 0;             // M
  double weight_elements = 0;  // N x K
  double flops = 0;
  double bytes = 0;            // weights + activations in and out
  double peak_flops = 0;       // the rate its FLOPs run at with efficiency 1
  double seconds = 0;
};

// One measured memory-bound kernel.
struct StreamSample {
  std::string family;  // rms_norm, rope, act, add, embedding, copy
  double bytes = 0;
  double seconds = 0;
  // Measured with its data in L2 on purpose (a microbenchmark's l2_resident = 1): its efficiency
  // may exceed the HBM bound. Nothing else proves L2 residency: operator tables that reused their
  // buffers show it, but by accident.
  bool l2_resident = false;
  // The rows it processed and the bytes each moved (0 = unknown): kernels that give a row to one
  // thread block (RMSNorm, SiLU-and-multiply, rotary) cannot finish a row faster than one block
  // streams its bytes, whatever the total (fit_profile's row floor).
  double rows = 0;
  double bytes_per_row = 0;
};

struct MessageSample {
  int64_t gpus = 0;
  double bytes = 0;
  double seconds = 0;          // the median (or only) measurement
  double fastest_seconds = 0;  // the fastest repetition; 0 = unknown (then `seconds`)
};

// What a fit sees, whatever produced it.
struct Samples {
  std::vector<GemmSample> gemm, gemm_fp8;
  std::vector<StreamSample> streams;
  std::vector<MessageSample> all_reduce, send_recv;
};

// The physical bound of a memory efficiency (bytes moved / (time x datasheet HBM bandwidth)): a
// kernel cannot draw more than the datasheet bandwidth from HBM. Measured efficiencies above it
// mean the data came from L2, because the measurement reused its buffers; serving does not (the
// next layer's weights, activations and KV cache are not in L2), so a fit caps such samples at
// this bound and its curves never exceed it, unless a sample is l2_resident on purpose.
inline constexpr double kMaxHbmEfficiency = 1.0;

// What a fit capped: memory-efficiency samples above kMaxHbmEfficiency, by the table they went
// into ("gemm", "gemm_fp8", "elementwise.add", "attention_decode 8/1/128/16", ...).
struct CapReport {
  size_t samples = 0;                    // memory-efficiency samples the fit saw
  std::map<std::string, size_t> capped;  // by table
  size_t total() const;
  // "" when nothing was capped, else "N of M memory-efficiency samples above 1 x HBM bandwidth
  // capped to it (table n, ...)".
  std::string summary() const;
};

// `efficiency`, or kMaxHbmEfficiency when above it (counted in `report` under `table`).
double cap_memory_efficiency(double efficiency, const std::string& table, CapReport& report);

// The fixed time per kernel a profile uses: 0.8 x the shortest measured kernel, at least 0.5 us
// (a kernel's measured time includes it, so it cannot exceed the fastest one).
double fitted_kernel_seconds(const Samples& samples);

// Fits the tables of a profile to `samples` on `gpu`: GEMM compute efficiency over (rows, weight
// elements), GEMM memory efficiency over bytes (from the samples of at most 8 rows, where the
// weight stream dominates), one curve per elementwise family over bytes, all-reduce latency and
// bus bandwidth per GPU count (intra-node), send/recv alpha-beta. Sections without samples are left
// empty. `kernel_s` is subtracted from each measured time before efficiencies are taken; GEMMs get
// their own fixed time, the zero-bytes intercept of their weight-streaming (<= 8 rows) times.
// Memory efficiencies are capped at kMaxHbmEfficiency (except l2_resident samples), counted in
// `caps`.
hwmodels::CalibrationProfile fit_profile(const Samples& samples, const hwmodels::GpuSpec& gpu, double kernel_s,
                                         CapReport& caps);

// Per-GPU samples of measured operator tables: each row's operators through the roofline model's
// own operator shapes (RooflineCostModel::operator_shapes), so fitting and prediction agree.
// Operators the model does not know are skipped. Collectives: intra-node rows only (devices per
// node = GPUs), as tensor parallelism runs within a node.
Samples samples_from_operator_data(const OperatorData& data, const hwmodels::GpuSpec& gpu);

// The whole --from-operator-csv fit: samples, kernel time, tables; `source` goes into the profile.
hwmodels::CalibrationProfile fit_operator_profile(const OperatorData& data, const hwmodels::GpuSpec& gpu,
                                                  const std::string& source);

// ---- Engine overheads from step latencies ---------------------------------------------------------

// One measured phase of a step-latency row against the model.
struct OverheadRow {
  int64_t line = 0;
  std::string model;
  std::string phase;          // "prefill" or "decode"
  int64_t layers = 0;
  double measured_ms = 0;
  double physics_ms = 0;      // the base profile's kernels, no engine overhead
  double predicted_ms = 0;    // physics + the fitted overheads
  double held_out_ms = 0;     // the same with overheads fitted on every other row of the phase
};

struct OverheadFit {
  hwmodels::CalibrationProfile profile;  // the base with its [overhead] section replaced
  std::vector<OverheadRow> rows;
  double mape = 0;            // in-sample, fraction
  double held_out_mape = 0;   // leave-one-row-out, fraction (0 with a single row per phase)
  // Whether a per-layer term could be told apart from the per-iteration one: it needs rows of
  // models with different layer counts in that phase.
  bool prefill_per_layer = false, decode_per_layer = false;
};

// Fits per-iteration (ms) and per-layer (us) overheads, separately for prefill passes and for
// decode iterations, so that physics + overheads matches the measurements with the least relative
// error; overheads are never negative. Physics is the roofline model of each row's model on `gpu`
// with the base profile (or the constant efficiencies when `base` is null) and zero engine overhead;
// `cuda_graphs` says whether the engine replays decode iterations as CUDA graphs. `models[i]` is
// rows[i]'s model. Nothing the physics fixes (efficiencies, launch costs) is changed.
OverheadFit fit_step_latencies(const std::vector<StepLatencyRow>& rows, const std::vector<hwmodels::ModelSpec>& models,
                               const hwmodels::GpuSpec& gpu, const hwmodels::CalibrationProfile* base, bool cuda_graphs);

}  // namespace servesim::calibration
