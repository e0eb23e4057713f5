#include "experiments/serving_fit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "experiments/prediction.h"
#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::experiments {

std::vector<std::string> ServingFitParams::overrides() const {
  auto num = [](double v) { return core::format_double(v); };
  return {"engine.api_server_ms=" + num(api_server_ms),
          "engine.stream_ms=" + num(stream_ms),
          "engine.first_token_ms=" + num(first_token_ms),
          "engine.sample_ms=" + num(sample_ms),
          std::string("engine.async_scheduling=") + (async_scheduling ? "true" : "false"),
          "cost_model.attention_memory_efficiency=" + num(decode_efficiency)};
}

void apply_to_profile(const ServingFitParams& p, const std::string& engine_kind, hwmodels::CalibrationProfile& profile) {
  auto& e = profile.engine[engine_kind];
  e["api_server_ms"] = p.api_server_ms;
  e["stream_ms"] = p.stream_ms;
  e["first_token_ms"] = p.first_token_ms;
  e["sample_ms"] = p.sample_ms;
  e["async_scheduling"] = p.async_scheduling ? 1.0 : 0.0;
  profile.attention_decode_efficiency = p.decode_efficiency;
}

std::vector<StageComparison> ServingFitResult::held_out() const {
  std::vector<StageComparison> out;
  for (const Fold& f : folds) out.insert(out.end(), f.predicted.begin(), f.predicted.end());
  return out;
}

namespace {

constexpr int kDims = 4;
using Point = std::array<double, kDims>;

// Coordinates Nelder-Mead moves in: times as logs (positive, and scale-free), the efficiency as a
// logit over (0.3, 1.0).
constexpr double kEffLo = 0.3, kEffHi = 1.0;
Point to_point(const ServingFitParams& p) {
  const double e = (p.decode_efficiency - kEffLo) / (kEffHi - kEffLo);
  return {std::log(p.stream_ms + 0.05), std::log(p.first_token_ms + 0.05), std::log(p.sample_ms + 0.02),
          std::log(e / (1 - e))};
}
ServingFitParams from_point(const Point& x, bool async) {
  ServingFitParams p;
  auto round4 = [](double v) { return std::round(v * 1e4) / 1e4; };
  p.stream_ms = round4(std::max(0.0, std::exp(x[0]) - 0.05));
  p.first_token_ms = round4(std::max(0.0, std::exp(x[1]) - 0.05));
  p.sample_ms = round4(std::max(0.0, std::exp(x[2]) - 0.02));
  p.decode_efficiency = round4(kEffLo + (kEffHi - kEffLo) / (1 + std::exp(-x[3])));
  p.async_scheduling = async;
  return p;
}

double stage_loss(const StageComparison& c) {
  if (!c.comparable()) return 0;
  double loss = 0;
  const std::pair<std::pair<const char*, const char*>, double> terms[] = {
      {{"ttft", "mean"}, 1.0}, {{"ttft", "p90"}, 0.5}, {{"tpot", "mean"}, 1.0},
      {{"e2e", "mean"}, 1.0},  {{"e2e", "p90"}, 0.5}};
  for (const auto& [figure, weight] : terms)
    if (const auto e = c.figure_error(figure.first, figure.second)) loss += weight * std::min(*e * *e, 4.0);
  // A simulation that saturates where the server kept up is the worst answer there is.
  if (c.saturation_mismatch) loss += 10.0;
  return loss;
}

struct Evaluated {
  double loss = 0;
  std::vector<StageComparison> comparisons;
};

Evaluated evaluate(const std::vector<MeasuredStage>& stages, const ServingFitParams& p, const ServingFitOptions& o) {
  ValidateOptions v = o.validate;
  for (const std::string& s : p.overrides()) v.sets.push_back(s);
  Evaluated e;
  e.comparisons = validate_stages(stages, v, o.jobs);
  for (const StageComparison& c : e.comparisons) e.loss += stage_loss(c);
  return e;
}

// Nelder-Mead (standard coefficients), from `start`, at most `budget` evaluations.
struct Minimum {
  Point x;
  double loss = 0;
  int evaluations = 0;
};
Minimum nelder_mead(const std::function<double(const Point&)>& f, const Point& start, int budget) {
  std::vector<std::pair<Point, double>> simplex;
  simplex.emplace_back(start, f(start));
  const Point steps = {0.5, 0.7, 0.7, 0.6};
  for (int i = 0; i < kDims; ++i) {
    Point x = start;
    x[static_cast<size_t>(i)] += steps[static_cast<size_t>(i)];
    simplex.emplace_back(x, f(x));
  }
  int used = kDims + 1;
  auto sort = [&] { std::stable_sort(simplex.begin(), simplex.end(), [](const auto& a, const auto& b) { return a.second < b.second; }); };
  while (used < budget) {
    sort();
    if (simplex.back().second - simplex.front().second < 1e-6 * (1 + simplex.front().second)) break;
    Point centroid{};
    for (int i = 0; i < kDims; ++i)
      for (int d = 0; d < kDims; ++d) centroid[static_cast<size_t>(d)] += simplex[static_cast<size_t>(i)].first[static_cast<size_t>(d)] / kDims;
    auto along = [&](double t) {
      Point x;
      for (int d = 0; d < kDims; ++d)
        x[static_cast<size_t>(d)] = centroid[static_cast<size_t>(d)] + t * (simplex.back().first[static_cast<size_t>(d)] - centroid[static_cast<size_t>(d)]);
      return x;
    };
    const Point xr = along(-1.0);
    const double fr = f(xr);
    ++used;
    if (fr < simplex.front().second) {
      const Point xe = along(-2.0);
      const double fe = f(xe);
      ++used;
      simplex.back() = fe < fr ? std::make_pair(xe, fe) : std::make_pair(xr, fr);
    } else if (fr < simplex[kDims - 1].second) {
      simplex.back() = {xr, fr};
    } else {
      const bool outside = fr < simplex.back().second;
      const Point xc = along(outside ? -0.5 : 0.5);
      const double fc = f(xc);
      ++used;
      if (fc < std::min(fr, simplex.back().second)) {
        simplex.back() = {xc, fc};
      } else {  // shrink towards the best
        for (size_t i = 1; i < simplex.size() && used < budget; ++i) {
          for (int d = 0; d < kDims; ++d)
            simplex[i].first[static_cast<size_t>(d)] =
                simplex[0].first[static_cast<size_t>(d)] + 0.5 * (simplex[i].first[static_cast<size_t>(d)] - simplex[0].first[static_cast<size_t>(d)]);
          simplex[i].second = f(simplex[i].first);
          ++used;
        }
      }
    }
  }
  sort();
  return {simplex.front().first, simplex.front().second, used};
}

// The residuals' uncertainty, or none when fewer than 3 stages have both figures.
hwmodels::CalibrationUncertainty uncertainty_if_known(const std::vector<StageComparison>& c, bool held_out) {
  try {
    return residual_uncertainty(c, held_out);
  } catch (const core::Error&) {
    return {};
  }
}

// One fit on `stages`: both async choices, the better kept.
ServingFitResult fit_once(const std::vector<MeasuredStage>& stages, const ServingFitOptions& o,
                          const ServingFitParams& start, const std::vector<bool>& async_choices, int budget) {
  std::vector<MeasuredStage> comparable;
  for (const MeasuredStage& s : stages)
    if (!s.overloaded()) comparable.push_back(s);
  ServingFitResult best;
  best.objective = std::numeric_limits<double>::infinity();
  for (const bool async : async_choices) {
    auto f = [&](const Point& x) { return evaluate(comparable, from_point(x, async), o).loss; };
    const Minimum m = nelder_mead(f, to_point(start), budget);
    if (m.loss < best.objective) {
      best.params = from_point(m.x, async);
      best.objective = m.loss;
    }
    best.evaluations += m.evaluations;
  }
  return best;
}

}  // namespace

ServingFitResult fit_serving_runs(const std::vector<MeasuredStage>& stages, const ServingFitOptions& o) {
  ServingFitResult result = fit_once(stages, o, ServingFitParams{}, {true, false}, o.max_evaluations);
  result.in_sample = evaluate(stages, result.params, o).comparisons;
  if (o.progress)
    o.progress("fitted on every experiment: objective " + core::format_double(result.objective) + " after " +
               std::to_string(result.evaluations) + " evaluations");
  if (!o.leave_one_out) {
    result.uncertainty = uncertainty_if_known(result.in_sample, false);
    return result;
  }
  std::vector<std::string> experiments;
  for (const MeasuredStage& s : stages)
    if (std::find(experiments.begin(), experiments.end(), s.experiment) == experiments.end())
      experiments.push_back(s.experiment);
  for (const std::string& held : experiments) {
    std::vector<MeasuredStage> train, test;
    for (const MeasuredStage& s : stages) (s.experiment == held ? test : train).push_back(s);
    ServingFitResult::Fold fold;
    fold.experiment = held;
    // Started where the fit on everything ended, with its choice of async scheduling and half the
    // evaluations: the same optimum when the held-out experiment did not move it.
    fold.params = fit_once(train, o, result.params, {result.params.async_scheduling}, o.max_evaluations / 2).params;
    fold.predicted = evaluate(test, fold.params, o).comparisons;
    if (o.progress) o.progress("fitted without " + held);
    result.folds.push_back(std::move(fold));
  }
  result.uncertainty = uncertainty_if_known(result.held_out(), true);
  return result;
}

hwmodels::CalibrationUncertainty residual_uncertainty(const std::vector<StageComparison>& c, bool held_out) {
  std::vector<double> step, front;
  for (const StageComparison& s : c) {
    if (!s.comparable()) continue;
    const ComparedFigure* itl = nullptr;
    const ComparedFigure* tpot = nullptr;
    const ComparedFigure* ttft = nullptr;
    for (const ComparedFigure& f : s.figures) {
      if (f.stat != "mean") continue;
      if (f.metric == "itl") itl = &f;
      if (f.metric == "tpot") tpot = &f;
      if (f.metric == "ttft") ttft = &f;
    }
    if (!itl) itl = tpot;  // a result without token gaps: its time per output token is the step too
    if (!itl || !ttft || !(itl->measured > 0) || !(itl->simulated > 0)) continue;
    step.push_back(std::log(itl->measured / itl->simulated));
    front.push_back(ttft->measured - ttft->simulated);
  }
  return hwmodels::uncertainty_from_residuals(step, front, held_out);
}

CoverageResult prediction_coverage(const std::vector<MeasuredStage>& stages, const std::vector<StageComparison>& fitted,
                                   const std::function<std::vector<std::string>(const std::string& experiment)>& overrides_for,
                                   const ValidateOptions& validate, int64_t draws, double level, int jobs) {
  static const std::pair<const char*, const char*> kFigures[] = {
      {"ttft", "mean"}, {"ttft", "p90"}, {"itl", "mean"}, {"e2e", "mean"}, {"e2e", "p90"}};
  std::vector<std::string> experiments;
  for (const MeasuredStage& s : stages)
    if (std::find(experiments.begin(), experiments.end(), s.experiment) == experiments.end())
      experiments.push_back(s.experiment);
  CoverageResult result;
  for (const std::string& held : experiments) {
    std::vector<MeasuredStage> test;
    for (const MeasuredStage& s : stages)
      if (s.experiment == held && !s.overloaded()) test.push_back(s);
    if (test.empty()) continue;
    std::vector<StageComparison> others;
    for (const StageComparison& c : fitted)
      if (c.measured.experiment != held) others.push_back(c);
    const hwmodels::CalibrationUncertainty u = residual_uncertainty(others, true);
    ValidateOptions base = validate;
    for (const std::string& s : overrides_for(held)) base.sets.push_back(s);
    const std::vector<StageComparison> point = validate_stages(test, base, jobs);
    // The draws keep the validation's seed, so the held-out stages' arrivals stay those of the point.
    const std::vector<std::vector<StageComparison>> drawn = validate_draws(test, base, u, draws, jobs);
    const auto intervals = figure_intervals(point, drawn, level);
    for (size_t i = 0; i < test.size(); ++i) {
      for (const auto& [metric, stat] : kFigures) {
        for (size_t k = 0; k < point[i].figures.size(); ++k) {
          const ComparedFigure& p = point[i].figures[k];
          if (p.metric != metric || p.stat != stat) continue;
          CoveredFigure c{test[i].label, metric, stat, p.measured, p.simulated, intervals[i][k].lo, intervals[i][k].hi};
          result.covered += c.covered() ? 1 : 0;
          result.figures.push_back(std::move(c));
        }
      }
    }
  }
  return result;
}

}  // namespace servesim::experiments
