#pragma once
// Fitting a serving engine to real serving runs (servesim fit --from-serving-runs): the engine terms
// and the kernel efficiency the per-operator tables cannot pin down, chosen so that the simulations
// of the measured stages reproduce their TTFT, TPOT and E2E; and how well a fit that never saw an
// experiment predicts it (leave one experiment out).
//
// What is fitted, and why these:
// - stream_ms, first_token_ms: the client path back. Ingress (api_server_ms) and stream_ms move TTFT
//   and E2E alike, so only their sum is identifiable; api_server_ms stays at the value the runs'
//   publishers measured (about 5-7 ms from arrival to queued: 6 ms) and the rest is stream_ms.
//   first_token_ms moves TTFT alone.
// - sample_ms: per-iteration time nothing overlaps (sampling, logits, the token copy back), which
//   the operator tables (one layer's kernels) cannot see.
// - the decode attention peak efficiency ([attention] decode_memory_efficiency): the reference data
//   hold no attention timings, and at high batch decode attention is most of a step.
// - async_scheduling, true or false: both are fitted and the better kept.
// Objective: the sum over the stages the server kept up with of squared relative errors of TTFT
// mean and p90, TPOT mean, E2E mean and p90 (p90s weighted half); Nelder-Mead in transformed
// coordinates (logs of the times, a logit of the efficiency), deterministic.

#include <functional>
#include <string>
#include <vector>

#include "experiments/validate_serving.h"
#include "hwmodels/calibration_profile.h"

namespace servesim::experiments {

struct ServingFitParams {
  double api_server_ms = 6.0;  // fixed (see above)
  double stream_ms = 1.0;
  double first_token_ms = 0.0;
  double sample_ms = 0.3;
  double decode_efficiency = 0.85;
  bool async_scheduling = true;
  // The --set overrides that apply these to a simulation.
  std::vector<std::string> overrides() const;
};

struct ServingFitOptions {
  ValidateOptions validate;    // engine, GPU, calibration (the base profile), seed, ...
  bool leave_one_out = false;  // also fit once without each experiment and predict it
  int jobs = 0;                // stages simulated in parallel
  int max_evaluations = 120;   // Nelder-Mead evaluations per fit and async choice
  std::function<void(const std::string&)> progress;  // a line per finished fit
};

struct ServingFitResult {
  ServingFitParams params;
  double objective = 0;
  int evaluations = 0;
  std::vector<StageComparison> in_sample;  // every stage, with the fitted parameters
  struct Fold {
    std::string experiment;                // held out
    ServingFitParams params;               // fitted without it
    std::vector<StageComparison> predicted;  // its stages
  };
  std::vector<Fold> folds;
  // The calibration uncertainty its residuals give (hwmodels/uncertainty.h): the held-out ones with
  // leave_one_out, else the in-sample ones; empty with fewer than 3 stages to give them.
  hwmodels::CalibrationUncertainty uncertainty;
  // The held-out predictions of every experiment's stages, in input order (leave_one_out).
  std::vector<StageComparison> held_out() const;
};

ServingFitResult fit_serving_runs(const std::vector<MeasuredStage>& stages, const ServingFitOptions& options);

// The calibration uncertainty of compared stages (those the server kept up with, with an ITL (else
// TPOT) and a TTFT mean): per stage ln(measured / simulated ITL mean) and measured - simulated TTFT
// mean.
// core::Error with fewer than 3 such stages.
hwmodels::CalibrationUncertainty residual_uncertainty(const std::vector<StageComparison>& c, bool held_out);

// Coverage of the prediction intervals, leave one experiment out: for each experiment, the
// uncertainty from the residuals of the other experiments' stages (as `fitted` simulated them: each
// stage's comparison as the caller has it: held-out predictions, or the shipped fit's), then `draws`
// draws of the calibration error on each of its stages the server kept up with, simulated with the
// --set overrides `overrides_for` gives its experiment (a fold's parameters, or none); a figure is
// covered when its measured value lies in the interval at `level` of its draws. Figures: TTFT mean and p90, ITL mean, E2E mean and p90.
struct CoveredFigure {
  std::string stage, metric, stat;
  double measured = 0, simulated = 0, lo = 0, hi = 0;
  bool covered() const { return measured >= lo && measured <= hi; }
};
struct CoverageResult {
  std::vector<CoveredFigure> figures;
  int64_t covered = 0;
  double fraction() const { return figures.empty() ? 0.0 : static_cast<double>(covered) / static_cast<double>(figures.size()); }
};
CoverageResult prediction_coverage(const std::vector<MeasuredStage>& stages, const std::vector<StageComparison>& fitted,
                                   const std::function<std::vector<std::string>(const std::string& experiment)>& overrides_for,
                                   const ValidateOptions& validate, int64_t draws, double level, int jobs);

// The fitted values written into a profile: [engine.<kind>] and [attention].
void apply_to_profile(const ServingFitParams& p, const std::string& engine_kind, hwmodels::CalibrationProfile& profile);

}  // namespace servesim::experiments
