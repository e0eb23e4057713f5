#pragma once
// Real serving runs against servesim (servesim validate-serving; servesim fit --from-serving-runs):
// each measured load stage becomes the equivalent simulation (the deployment, the workload's shape,
// the stages that ran before it on the same server, its arrivals), which is run and measured with
// the same definitions as the measurement (experiments/serving_results.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "experiments/serving_results.h"
#include "hwmodels/uncertainty.h"

namespace servesim::experiments {

struct ValidateOptions {
  std::string engine = "vllm-v1";       // [engine] kind
  std::string gpu;                      // overrides the file's GPU ("" = the file's; required when it has none)
  std::string model;                    // a [model] preset or a config.json; "" = mapped from the file's model
  int64_t tensor_parallel = 0;          // 0 = the file's
  std::string calibration;              // [cost_model] calibration ("" = the GPU's shipped profile)
  std::vector<std::string> sets;        // --set overrides, applied to every simulation last
  uint64_t seed = 1;
  double client_timeout_s = 300;        // the load generator's time-out (inference-perf's default)
  // What a file lacks (an inference-perf summary file has no rate or duration): from flags.
  double rate = 0, duration_s = 0;
  int64_t max_num_seqs = 256, max_num_batched_tokens = 8192;  // vLLM V1's defaults, when not said
};

// The run configuration (TOML) that simulates `stage`. Throws core::ConfigError / core::InputError
// when the file and the options leave something required unsaid (the message names the flag).
// `lengths_jsonl`, when given, is a JSON-lines file of the stage's per-request lengths (keys
// input_len, output_len), replayed in order in place of the stage's mean lengths.
std::string stage_config(const MeasuredStage& stage, const ValidateOptions& options,
                         const std::string& lengths_jsonl = "");

// The simulation of one stage, measured as the measurement was.
struct SimulatedStage {
  MeasuredLatency ttft, tpot, itl, e2e;  // seconds
  int64_t completed = 0, failed = 0;     // of the measured stage's requests
  double throughput_req_s = 0, output_tok_s = 0;
  std::string config;                    // the resolved configuration it ran
  double wall_seconds = 0;
};
SimulatedStage simulate_stage(const MeasuredStage& stage, const ValidateOptions& options);

// One compared figure: relative error (simulated - measured) / measured.
struct ComparedFigure {
  std::string metric;   // "ttft", "tpot", "itl", "e2e", "throughput", "failed"
  std::string stat;     // "mean", "p50", "p90", "p99", ""
  double measured = 0, simulated = 0;
  double error() const { return measured != 0 ? (simulated - measured) / measured : 0.0; }
};

struct StageComparison {
  MeasuredStage measured;
  SimulatedStage simulated;
  std::vector<ComparedFigure> figures;
  // The server kept up (no failures) and so should the simulation: its latencies are comparable.
  bool comparable() const { return !measured.overloaded(); }
  // The simulation says overloaded where the server was not (requests failing or waiting for
  // ever), or the reverse.
  bool saturation_mismatch = false;
  std::optional<double> figure_error(const std::string& metric, const std::string& stat) const;
};

// Compares every stage (in parallel on `jobs` threads; 0 = all cores; results in input order).
std::vector<StageComparison> validate_stages(const std::vector<MeasuredStage>& stages, const ValidateOptions& options,
                                             int jobs = 0);
StageComparison compare(const MeasuredStage& measured, const SimulatedStage& simulated);

// Mean absolute relative error of a figure over the comparable stages (nullopt when none has it).
std::optional<double> mean_abs_error(const std::vector<StageComparison>& c, const std::string& metric,
                                     const std::string& stat);

// Prediction intervals of compared figures: `drawn` holds validate_stages of the same stages as
// `point`, one per draw of the calibration error (experiments/prediction.h); per stage and figure
// (in `point`'s order), the interval at `level` of the figure's simulated values across the draws.
// validate_stages of `stages` under each of `draws` draws of the calibration error `u` (from
// `options.seed`; experiments/prediction.h), in draw order.
std::vector<std::vector<StageComparison>> validate_draws(const std::vector<MeasuredStage>& stages,
                                                         const ValidateOptions& options,
                                                         const hwmodels::CalibrationUncertainty& u, int64_t draws,
                                                         int jobs);
struct FigureInterval {
  double lo = 0, hi = 0;
  bool contains(double v) const { return v >= lo && v <= hi; }
};
std::vector<std::vector<FigureInterval>> figure_intervals(const std::vector<StageComparison>& point,
                                                          const std::vector<std::vector<StageComparison>>& drawn,
                                                          double level);

// The calibration uncertainty the simulations of `stages` would draw from: that of the profile the
// first stage's simulation uses (core::ConfigError when it has none; experiments/prediction.h).
hwmodels::CalibrationUncertainty stage_uncertainty(const std::vector<MeasuredStage>& stages, const ValidateOptions& options);

// The servesim [model] of a benchmark's model id ("meta-llama/Llama-2-7b-hf" -> llama-2-7b), or "".
std::string model_preset_for(const std::string& model_id);

}  // namespace servesim::experiments
