#pragma once
// Calibration uncertainty: how far a calibrated step cost and client path can be from the real
// engine's, as the fit's residuals say, and the cost-model decorator that applies one draw of that
// error to a run (servesim run --prediction-draws; experiments/prediction.h).
//
// The error model. A fit to real serving runs (servesim fit --from-serving-runs) leaves, per load
// stage the server kept up with, two residuals:
//   step      e_s = ln(measured ITL mean / simulated ITL mean): the error of the time per decode step
//             (ITL is the time between two of a request's tokens, so, to first order, one iteration);
//   frontend  e_f = measured TTFT mean - simulated TTFT mean, in seconds: what of TTFT the step error
//             does not explain (the API server, tokenisation, the first chunk's path to the client).
// Their second moments about zero (not about their mean: a bias is an error too) and their
// correlation are kept in the profile's [uncertainty] table with the residuals' count n and whether
// they are held-out (each stage predicted by a fit that never saw its experiment) or in-sample.
// A run's error is one draw of (e_s, e_f): the residuals are per stage and systematic (the same
// kernel is off by the same fraction at every step of a run), so the draw holds for every step of the
// run, fully correlated across steps. The draw is the predictive distribution of a new residual from
// n observed ones: a bivariate Student t with n degrees of freedom (the scale estimated from n
// residuals about a known zero mean) and the residuals' covariance, widened by sqrt(1 + 1/n).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwmodels/cost_model.h"

namespace servesim::hwmodels {

struct CalibrationUncertainty {
  int64_t residuals = 0;       // n: stages behind the figures below
  double step_log_rms = 0;     // RMS of e_s (natural log of a ratio)
  double frontend_rms_s = 0;   // RMS of e_f, seconds
  double correlation = 0;      // of e_s and e_f (about zero, as the RMS)
  bool held_out = false;       // leave-one-experiment-out residuals; false: in-sample
  bool empty() const { return residuals == 0; }
};

// The figures of residual pairs (e_s, e_f). Needs at least 3 pairs (core::Error otherwise).
CalibrationUncertainty uncertainty_from_residuals(const std::vector<double>& step_log,
                                                  const std::vector<double>& frontend_s, bool held_out);

// One draw of the calibration error, as a run applies it.
struct CalibrationDraw {
  double step_scale = 1;      // every step's GPU time is multiplied by this: exp(e_s)
  double frontend_offset_s = 0;  // added to the engine's ingress time (not below zero in total)
};
// `count` draws, the i-th from its own stream of `seed` ("prediction/<i>"), so a draw does not move
// when `count` changes. The step factor is kept in [0.01, 100] and the offset in [-60, 60] s (the
// t's tails with few residuals are long).
std::vector<CalibrationDraw> draw_calibration_errors(const CalibrationUncertainty& u, uint64_t seed, int64_t count);

// The error at quantile p of the step factor's predictive distribution (t_{n, p} x sqrt(1 + 1/n) x
// the step RMS), with the client-path offset at its mean given that step error (correlation x its RMS
// x the step error's standard score): one setting for a what-if at the interval's end, e.g. a
// capacity search at p = 0.05 and 0.95 (docs/experiments.md, "Prediction intervals").
CalibrationDraw calibration_quantile(const CalibrationUncertainty& u, double p);

// The decorator: the wrapped model's step with every time multiplied by `scale` (FLOPs, bytes and the
// peak-FLOP seconds unchanged: the work is the same, only its speed is off).
class ScaledCostModel final : public StepCostModel {
 public:
  ScaledCostModel(std::unique_ptr<StepCostModel> inner, double scale);
  StepCost step(const BatchShape& shape) const override;
  void decode_steps(const BatchShape& shape, int64_t stride, int count, StepCost* out) const override;
  const ModelSpec& model() const override { return inner_->model(); }
  const GpuSpec& gpu() const override { return inner_->gpu(); }
  int64_t tensor_parallel() const override { return inner_->tensor_parallel(); }
  int64_t gpus() const override { return inner_->gpus(); }
  const StepCostModel& inner() const { return *inner_; }
  double scale() const { return scale_; }

 private:
  std::unique_ptr<StepCostModel> inner_;
  double scale_;
};

}  // namespace servesim::hwmodels
