#pragma once
// Prediction intervals from calibration uncertainty (servesim run --prediction-draws N).
//
// The run as configured gives the point answer. Then N draws of the calibration error
// (hwmodels/uncertainty.h: a step-time factor and a client-path offset, drawn from the residuals the
// serving fit left in the GPU's calibration profile) each re-run the same configuration, with the
// same seed and so the same arrivals and lengths, under that error ([prediction] step_scale and
// frontend_offset_ms). Every summary value's prediction interval at level L is the range between the
// (1 - L) / 2 and (1 + L) / 2 quantiles of its N draws (linear interpolation between order
// statistics); the probability that the configuration meets its SLO is the fraction of draws whose
// steady-state SLO attainment reaches the target. What it covers: the step cost model's error as
// measured end to end, not the randomness of arrivals (replications) nor what the error model leaves
// out (docs/limitations.md).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "experiments/replications.h"
#include "experiments/run.h"
#include "hwmodels/uncertainty.h"

namespace servesim::experiments {

// The --set overrides that apply one draw to a run.
std::vector<std::string> prediction_overrides(const hwmodels::CalibrationDraw& draw);

// The calibration uncertainty of the run's pools and the profile it comes from. core::ConfigError
// (at cost_model.calibration) when a pool has no profile, its profile has no [uncertainty], or the
// pools' profiles disagree on it.
struct RunUncertainty {
  std::string profile;
  hwmodels::CalibrationUncertainty uncertainty;
};
RunUncertainty run_uncertainty(const core::Params& config);

struct PredictionOptions {
  int64_t draws = 40;       // >= 10
  double level = 0.90;      // of the intervals, in (0, 1)
  double slo_target = 0.90; // the attainment a run must reach to meet its SLO
  ReplicationOptions run;   // jobs, database, CSV, checker (count unused)
};

struct PredictedMetric {
  std::string name;
  double point = 0;             // the run as configured
  double lo = 0, hi = 0;        // the interval (NaN when fewer than two draws know it)
  std::vector<double> values;   // per draw, in order
};

struct PredictionResult {
  RunUncertainty source;
  RunResult point;                                // the run as configured (first in the database)
  std::vector<hwmodels::CalibrationDraw> errors;  // per draw
  std::vector<RunResult> draws;
  std::vector<PredictedMetric> metrics;           // in metrics::flatten order
  double level = 0.9, slo_target = 0.9;
  // Fraction of draws whose slo_attainment_window >= slo_target; NaN when the run has no SLO.
  double p_meets_slo = 0;
};

PredictionResult run_prediction(const std::function<core::Params(const std::vector<std::string>&)>& load,
                                const PredictionOptions& options);
const PredictedMetric* find_predicted(const std::vector<PredictedMetric>& metrics, const std::string& name);

// The interval [lo, hi] at `level` of `values` (NaN ignored): the (1 - level) / 2 and (1 + level) / 2
// quantiles, linear between order statistics. {NaN, NaN} with fewer than two values.
std::pair<double, double> prediction_interval(std::vector<double> values, double level);

}  // namespace servesim::experiments
