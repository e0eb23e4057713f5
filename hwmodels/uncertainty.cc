#include "hwmodels/uncertainty.h"

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "sim/metrics/steady_state.h"

namespace servesim::hwmodels {

CalibrationUncertainty uncertainty_from_residuals(const std::vector<double>& step_log,
                                                  const std::vector<double>& frontend_s, bool held_out) {
  if (step_log.size() != frontend_s.size())
    throw core::Error("calibration uncertainty: " + std::to_string(step_log.size()) + " step residuals but " +
                      std::to_string(frontend_s.size()) + " front-end residuals");
  if (step_log.size() < 3)
    throw core::Error("calibration uncertainty needs the residuals of at least 3 stages the server kept up with, got " +
                      std::to_string(step_log.size()));
  double ss = 0, ff = 0, sf = 0;
  for (size_t i = 0; i < step_log.size(); ++i) {
    ss += step_log[i] * step_log[i];
    ff += frontend_s[i] * frontend_s[i];
    sf += step_log[i] * frontend_s[i];
  }
  const double n = static_cast<double>(step_log.size());
  CalibrationUncertainty u;
  u.residuals = static_cast<int64_t>(step_log.size());
  u.step_log_rms = std::sqrt(ss / n);
  u.frontend_rms_s = std::sqrt(ff / n);
  u.correlation = ss > 0 && ff > 0 ? std::clamp(sf / std::sqrt(ss * ff), -1.0, 1.0) : 0.0;
  u.held_out = held_out;
  return u;
}

std::vector<CalibrationDraw> draw_calibration_errors(const CalibrationUncertainty& u, uint64_t seed, int64_t count) {
  std::vector<CalibrationDraw> draws;
  if (u.empty()) throw core::Error("calibration uncertainty: no residuals to draw from");
  const double n = static_cast<double>(u.residuals);
  const double widen = std::sqrt(1.0 + 1.0 / n);
  const double rho = u.correlation;
  for (int64_t i = 0; i < count; ++i) {
    core::Rng rng(seed, "prediction/" + std::to_string(i));
    const double z1 = rng.normal();
    const double z2 = rng.normal();
    // Student t with n degrees of freedom: a normal over sqrt(chi^2_n / n), chi^2_n = Gamma(n/2, 2).
    const double t = std::sqrt(n / rng.gamma(n / 2.0, 2.0));
    const double e_step = widen * t * u.step_log_rms * z1;
    const double e_front = widen * t * u.frontend_rms_s * (rho * z1 + std::sqrt(std::max(0.0, 1.0 - rho * rho)) * z2);
    // The t's tails are long; a draw stays a step factor a run can take ([prediction] step_scale's
    // range) and a client path of at most a minute either way.
    draws.push_back({std::clamp(std::exp(e_step), 0.01, 100.0), std::clamp(e_front, -60.0, 60.0)});
  }
  return draws;
}

CalibrationDraw calibration_quantile(const CalibrationUncertainty& u, double p) {
  if (u.empty()) throw core::Error("calibration uncertainty: no residuals to take a quantile of");
  const double n = static_cast<double>(u.residuals);
  const double score = metrics::student_t_quantile(p, n) * std::sqrt(1.0 + 1.0 / n);
  return {std::exp(score * u.step_log_rms), u.correlation * score * u.frontend_rms_s};
}

ScaledCostModel::ScaledCostModel(std::unique_ptr<StepCostModel> inner, double scale)
    : inner_(std::move(inner)), scale_(scale) {}

namespace {

void scale_times(StepCost& c, double scale) {
  c.seconds *= scale;
  AllToAllTime& a = c.all_to_all;
  a.compute_s *= scale;
  a.fixed_s *= scale;
  a.nvlink_s *= scale;
  a.scaleout_s *= scale;
}

}  // namespace

StepCost ScaledCostModel::step(const BatchShape& shape) const {
  StepCost c = inner_->step(shape);
  scale_times(c, scale_);
  return c;
}

void ScaledCostModel::decode_steps(const BatchShape& shape, int64_t stride, int count, StepCost* out) const {
  inner_->decode_steps(shape, stride, count, out);
  for (int j = 0; j < count; ++j) scale_times(out[j], scale_);
}

}  // namespace servesim::hwmodels
