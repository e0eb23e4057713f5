#include "experiments/prediction.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "hwmodels/calibration_profile.h"
#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/metrics/stats.h"
#include "sim/metrics/summary.h"

namespace servesim::experiments {

std::vector<std::string> prediction_overrides(const hwmodels::CalibrationDraw& draw) {
  return {"prediction.step_scale=" + core::format_double(draw.step_scale),
          "prediction.frontend_offset_ms=" + core::format_double(draw.frontend_offset_s * 1e3)};
}

RunUncertainty run_uncertainty(const core::Params& config) {
  const core::Params& cost = config.section("cost_model");
  const std::string key = "calibration";
  std::optional<RunUncertainty> found;
  for (const auto& [pool, path] : calibration_profiles(config)) {
    if (path.empty())
      throw core::ConfigError(cost.where(key), cost.key_path(key),
                              "prediction intervals need a calibration profile with an [uncertainty] table, and " +
                                  pool + " runs without one (an uncalibrated GPU, or calibration = \"none\"); the "
                                  "shipped H100 profile has one (docs/experiments.md, \"Prediction intervals\")");
    RunUncertainty u{path, hwmodels::read_calibration_profile(path).uncertainty};
    // A shipped profile by its file name (where the build keeps it is no business of the message).
    const std::string name = cost.given(key) ? path : "shipped with servesim, " + std::filesystem::path(path).filename().string();
    if (u.uncertainty.empty())
      throw core::ConfigError(cost.where(key), cost.key_path(key),
                              "the calibration profile (" + name + ") of " + pool +
                                  " has no [uncertainty] table: nothing measured end to end says how far its runs "
                                  "are from a real engine; `servesim fit --from-serving-runs` writes one");
    if (found && (found->uncertainty.residuals != u.uncertainty.residuals ||
                  found->uncertainty.step_log_rms != u.uncertainty.step_log_rms ||
                  found->uncertainty.frontend_rms_s != u.uncertainty.frontend_rms_s ||
                  found->uncertainty.correlation != u.uncertainty.correlation))
      throw core::ConfigError(cost.where(key), cost.key_path(key),
                              "the pools' calibration profiles (" + found->profile + ", " + path +
                                  ") give different calibration uncertainties; one draw cannot stand for both");
    if (!found) found = std::move(u);
  }
  return *found;
}

std::pair<double, double> prediction_interval(std::vector<double> values, double level) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
  if (values.size() < 2) return {nan, nan};
  std::sort(values.begin(), values.end());
  return {metrics::percentile_sorted(values, 50.0 * (1.0 - level)), metrics::percentile_sorted(values, 50.0 * (1.0 + level))};
}

const PredictedMetric* find_predicted(const std::vector<PredictedMetric>& metrics, const std::string& name) {
  for (const auto& m : metrics)
    if (m.name == name) return &m;
  return nullptr;
}

PredictionResult run_prediction(const std::function<core::Params(const std::vector<std::string>&)>& load,
                                const PredictionOptions& options) {
  if (options.draws < 10 || options.draws > 10000)
    throw core::UsageError("--prediction-draws needs at least 10 (the interval's ends are quantiles of the draws) and at "
                           "most 10000 (each is a run), got " + std::to_string(options.draws));
  if (!(options.level > 0 && options.level < 1))
    throw core::UsageError("--prediction-level is a fraction in (0, 1), got " + core::format_double(options.level));
  const core::Params base = load({});
  if (base.has("prediction") && base.section("prediction").given("step_scale"))
    base.section("prediction").fail("step_scale", "the draws set the calibration error; remove [prediction] from "
                                                  "the configuration to draw it");
  PredictionResult result;
  result.level = options.level;
  result.slo_target = options.slo_target;
  result.source = run_uncertainty(base);
  result.errors = hwmodels::draw_calibration_errors(result.source.uncertainty,
                                                    static_cast<uint64_t>(base.get_int("seed")), options.draws);
  std::vector<core::Params> configs = {base};
  for (const auto& e : result.errors) configs.push_back(load(prediction_overrides(e)));
  std::vector<RunResult> runs = run_in_order(configs, options.run, [&](size_t i) {
    return i == 0 ? std::string("the run as configured")
                  : "draw " + std::to_string(i - 1) + " (step time x " +
                        core::format_double(result.errors[i - 1].step_scale) + ")";
  });
  result.point = std::move(runs.front());
  result.draws.assign(std::make_move_iterator(runs.begin() + 1), std::make_move_iterator(runs.end()));
  const auto point = metrics::flatten(result.point.summary);
  std::vector<std::vector<metrics::NamedValue>> drawn;
  for (const RunResult& r : result.draws) drawn.push_back(metrics::flatten(r.summary));
  for (size_t k = 0; k < point.size(); ++k) {
    PredictedMetric m;
    m.name = point[k].name;
    m.point = point[k].value;
    for (const auto& d : drawn) m.values.push_back(d[k].value);
    std::tie(m.lo, m.hi) = prediction_interval(m.values, options.level);
    result.metrics.push_back(std::move(m));
  }
  const metrics::Slo& slo = result.point.slo;
  if (!slo.ttft_ms && !slo.tpot_ms && !slo.e2e_ms) {
    result.p_meets_slo = std::numeric_limits<double>::quiet_NaN();
  } else {
    int64_t meets = 0;
    for (const RunResult& r : result.draws) meets += r.summary.steady.slo_attainment >= options.slo_target ? 1 : 0;
    result.p_meets_slo = static_cast<double>(meets) / static_cast<double>(result.draws.size());
  }
  return result;
}

}  // namespace servesim::experiments
