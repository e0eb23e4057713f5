#include "experiments/capacity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <ostream>

#include "experiments/run.h"
#include "experiments/sweep.h"
#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/core/rng.h"

namespace servesim::experiments {
namespace {

constexpr double kGrowth = 2.0;

double round6(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return std::strtod(buf, nullptr);
}

std::string hash_text(const std::string& text) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(core::fnv1a64(text)));
  return buf;
}

std::string slo_text(const core::Params& config) {
  const core::Params& slo = config.section("slo");
  std::string out;
  const std::pair<const char*, const char*> limits[] = {{"ttft_ms", "TTFT"}, {"tpot_ms", "TPOT"}, {"e2e_ms", "E2E"}};
  for (const auto& [key, name] : limits)
    if (slo.has(key)) out += (out.empty() ? "" : ", ") + std::string(name) + " <= " + core::format_double(slo.get_float(key)) + " ms";
  return out;
}

// What a capacity search needs to know of each configuration before anything runs.
struct Prepared {
  std::vector<std::vector<Setting>> configurations;
  std::vector<std::string> knobs;
  std::vector<double> starts;
  std::vector<std::string> infeasible;  // why a configuration cannot be built ("" = it can)
  std::string slo;
};

// Configuration `i` of `prep` as a result row: settings, label, knob, and whether it cannot run.
ConfigurationCapacity configuration(const Prepared& prep, size_t i) {
  ConfigurationCapacity c;
  c.settings = prep.configurations[i];
  c.label = settings_label(c.settings);
  c.knob = prep.knobs[i];
  if (!prep.infeasible[i].empty()) {
    c.status = KneeStatus::kInfeasible;
    c.infeasible = prep.infeasible[i];
  }
  return c;
}

Prepared prepare(Experiment& experiment, const CapacitySpec& spec, int jobs, bool need_start) {
  experiment.check(jobs);  // every point (configuration x seed) resolves and builds
  Prepared prep;
  prep.configurations = experiment.configurations();
  const size_t per_configuration = std::max<size_t>(1, experiment.seeds().size());
  for (size_t i = 0; i < prep.configurations.size(); ++i) {
    const auto& settings = prep.configurations[i];
    std::string infeasible;
    for (size_t j = 0; j < per_configuration; ++j) {
      const Point& p = experiment.points()[i * per_configuration + j];
      if (p.skipped && infeasible.empty()) infeasible = p.skip_reason;
    }
    prep.infeasible.push_back(infeasible);
    const core::Params config = experiment.resolve(settings, "configuration " + std::to_string(i));
    std::string knob = spec.knob;
    if (knob.empty()) {
      // A generator's rate, a composed workload's arrival rate, else a trace's replay speed.
      knob = find_param_spec(config, "workload.rate")           ? "workload.rate"
             : find_param_spec(config, "workload.arrival.rate") ? "workload.arrival.rate"
                                                                 : "workload.rate_scale";
    }
    const core::ParamSpec* knob_spec = find_param_spec(config, knob);
    if (!knob_spec || (knob_spec->type != core::ParamType::kFloat && knob_spec->type != core::ParamType::kInt))
      throw core::ConfigError(spec.where, "capacity.knob",
                              "'" + knob + "' is not a numeric key of configuration " + std::to_string(i) + " (" +
                                  settings_label(settings) +
                                  "); the knob is the arrival rate the search varies, e.g. workload.rate");
    for (const Axis& axis : experiment.axes())
      for (size_t k = 0; k < axis.keys.size(); ++k)
        if (axis.keys[k] == knob)
          throw core::ConfigError(axis.steps.front()[k].key_where, "axis.key",
                                  "the capacity search varies '" + knob + "' itself; remove this axis (or run "
                                  "servesim sweep for a fixed grid of rates)");
    const std::string slo = slo_text(config);
    if (slo.empty())
      throw core::ConfigError(config.section("slo").where(), "slo",
                              "configuration " + std::to_string(i) +
                                  " sets no [slo] limit (ttft_ms, tpot_ms, e2e_ms): SLO attainment would only count "
                                  "rejections, so there is no capacity to find");
    if (prep.slo.empty()) prep.slo = slo;
    double start = spec.start.value_or(0);
    if (!spec.start && need_start) {
      const auto v = get_number(config, knob);
      if (!v || !(*v > 0))
        throw core::ConfigError(spec.where, "capacity.start",
                                "configuration " + std::to_string(i) + " has no positive '" + knob +
                                    "' to start from; set [capacity] start");
      start = *v;
    }
    prep.knobs.push_back(knob);
    prep.starts.push_back(start);
  }
  return prep;
}

// The points of one probe: the configuration at `value`, once per seed.
std::vector<Point> probe_points(const Experiment& experiment, const std::vector<Setting>& settings,
                                const std::string& knob, double value, const core::SourceLocation& where) {
  std::vector<Point> out;
  std::vector<Setting> base = settings;
  base.push_back(Setting{knob, toml_float(value), where, where});
  auto add = [&](std::vector<Setting> s) {
    Point p;
    p.settings = std::move(s);
    const core::Params config = experiment.resolve(p.settings, "probe " + p.label());
    p.key = config_hash(config);
    p.seed = static_cast<uint64_t>(config.get_int("seed"));
    out.push_back(std::move(p));
  };
  if (experiment.seeds().empty()) {
    add(base);
  } else {
    for (uint64_t seed : experiment.seeds()) {
      auto s = base;
      s.push_back(Setting{"seed", std::to_string(seed), experiment.seeds_where(), experiment.seeds_where()});
      add(std::move(s));
    }
  }
  return out;
}

Probe pool(double value, const std::vector<RunFigures>& runs, double target) {
  Probe p;
  p.value = value;
  uint64_t meeting = 0, total = 0;
  int64_t tokens = 0;
  double cost = 0;
  for (const auto& f : runs) {
    meeting += f.requests_meeting_slo;
    total += f.requests_total;
    tokens += f.output_tokens;
    cost += f.cost_usd;
    p.goodput_req_s += f.goodput_req_s;
    p.offered_req_s += f.offered_req_s;
    p.throughput_output_tok_s += f.throughput_output_tok_s;
    p.ttft_ms_p90 += f.ttft_ms_p90;
    p.tpot_ms_p90 += f.tpot_ms_p90;
    if (f.sim_seconds > 0) p.gpus += f.gpu_hours * 3600.0 / f.sim_seconds;
    p.run_ids.push_back(f.run_id);
  }
  const double n = static_cast<double>(std::max<size_t>(1, runs.size()));
  p.goodput_req_s /= n;
  p.offered_req_s /= n;
  p.throughput_output_tok_s /= n;
  p.ttft_ms_p90 /= n;
  p.tpot_ms_p90 /= n;
  p.gpus /= n;
  p.slo_attainment = total ? static_cast<double>(meeting) / static_cast<double>(total) : 0;
  p.usd_per_mtok_output = tokens > 0 ? cost / static_cast<double>(tokens) * 1e6 : 0;
  p.pass = p.slo_attainment >= target;
  return p;
}

// Runs one round: the probes of several configurations, reusing what the database holds.
class Rounds {
 public:
  Rounds(const Experiment& experiment, ResultsDb* db, const CapacityOptions& options)
      : experiment_(experiment), db_(db), options_(options) {}

  // Each request: (settings, knob, value). Returns each probe's runs' figures.
  std::vector<std::vector<RunFigures>> run(const std::vector<std::vector<Point>>& probes, const std::string& what) {
    std::vector<std::vector<RunFigures>> figures(probes.size());
    std::vector<Point> todo;
    std::vector<std::pair<size_t, size_t>> where;  // todo[i] -> (probe, seed slot)
    int64_t next_index = db_ ? db_->next_point_index() : counter_;
    for (size_t i = 0; i < probes.size(); ++i) {
      figures[i].resize(probes[i].size());
      for (size_t j = 0; j < probes[i].size(); ++j) {
        Point p = probes[i][j];
        if (db_) {
          auto it = db_->done().find(p.key);
          if (it != db_->done().end()) {
            figures[i][j] = db_->figures(it->second);
            ++reused_;
            continue;
          }
        }
        p.index = next_index++;
        todo.push_back(std::move(p));
        where.emplace_back(i, j);
      }
    }
    counter_ = next_index;
    Progress progress(options_.progress, options_.progress_tty, what, static_cast<int64_t>(todo.size()),
                      options_.progress_period_s);
    run_points(experiment_, todo, db_, options_.jobs, &progress, false, [&](size_t k, const RunFigures& f) {
      figures[where[k].first][where[k].second] = f;
    });
    progress.finish();
    runs_ += static_cast<int64_t>(todo.size());
    return figures;
  }

  int64_t runs() const { return runs_; }
  int64_t reused() const { return reused_; }

 private:
  const Experiment& experiment_;
  ResultsDb* db_;
  const CapacityOptions& options_;
  int64_t counter_ = 0;
  int64_t runs_ = 0, reused_ = 0;
};

std::string spec_text(const Experiment& experiment, const std::string& mode) {
  std::string all = mode + "\n";
  for (const Point& p : experiment.points()) all += p.key + "\n";
  return all;
}

ExperimentRecord record(const Experiment& experiment, const std::string& kind, const std::string& identity_text) {
  ExperimentRecord r;
  r.identity = hash_text(identity_text);
  r.kind = kind;
  r.name = experiment.name();
  r.points = 0;
  r.source = experiment.text();
  return r;
}

}  // namespace

std::string knee_status_text(KneeStatus status) {
  switch (status) {
    case KneeStatus::kFound: return "found";
    case KneeStatus::kBelowMin: return "below min";
    case KneeStatus::kAboveMax: return "above max";
    case KneeStatus::kProbeLimit: return "probe limit";
    case KneeStatus::kInfeasible: return "infeasible";
  }
  return "?";
}

CapacityResult run_capacity(Experiment& experiment, const CapacityOptions& options) {
  CapacitySpec spec = experiment.capacity();
  if (options.target) spec.target = *options.target;
  if (options.tolerance) spec.tolerance = *options.tolerance;
  if (!(spec.target > 0 && spec.target <= 1)) throw core::Error("--target must be in (0, 1]");
  if (!(spec.tolerance >= 1e-4 && spec.tolerance < 1)) throw core::Error("--tolerance must be in [0.0001, 1)");
  const Prepared prep = prepare(experiment, spec, options.jobs, true);

  CapacityResult result;
  result.target = spec.target;
  result.tolerance = spec.tolerance;
  result.slo_text = prep.slo;

  std::unique_ptr<ResultsDb> db;
  if (!options.db_path.empty()) {
    char settings[256];
    std::snprintf(settings, sizeof settings, "target=%.17g tolerance=%.17g min=%.17g max=%.17g probes=%lld knob=%s",
                  spec.target, spec.tolerance, spec.min, spec.max, static_cast<long long>(spec.max_probes),
                  spec.knob.c_str());
    std::string starts;
    for (double s : prep.starts) starts += core::format_double(s) + " ";
    db = std::make_unique<ResultsDb>(
        options.db_path, record(experiment, "capacity", spec_text(experiment, "capacity v1") + settings + "\n" + starts));
  }
  Rounds rounds(experiment, db.get(), options);

  const size_t n = prep.configurations.size();
  std::vector<double> next(prep.starts);
  std::vector<double> lo(n, 0), hi(n, std::numeric_limits<double>::infinity());
  std::vector<bool> active(n, true);
  for (size_t i = 0; i < n; ++i) {
    ConfigurationCapacity c = configuration(prep, i);
    if (c.status == KneeStatus::kInfeasible) active[i] = false;
    result.configurations.push_back(std::move(c));
  }
  for (int round = 1;; ++round) {
    std::vector<size_t> which;
    std::vector<std::vector<Point>> probes;
    for (size_t i = 0; i < n; ++i) {
      if (!active[i]) continue;
      which.push_back(i);
      probes.push_back(probe_points(experiment, prep.configurations[i], prep.knobs[i], next[i], spec.where));
    }
    if (which.empty()) break;
    const auto figures = rounds.run(probes, "capacity round " + std::to_string(round));
    for (size_t k = 0; k < which.size(); ++k) {
      const size_t i = which[k];
      ConfigurationCapacity& c = result.configurations[i];
      const Probe p = pool(next[i], figures[k], spec.target);
      c.probes.push_back(p);
      if (p.pass) {
        lo[i] = p.value;
        c.knee = p;
      } else {
        hi[i] = p.value;
        c.lowest_failing = p.value;
      }
      const bool have_lo = c.knee.has_value(), have_hi = std::isfinite(hi[i]);
      double candidate = 0;
      if (have_lo && have_hi) {
        if (hi[i] - lo[i] <= spec.tolerance * lo[i]) {
          c.status = KneeStatus::kFound;
          active[i] = false;
          continue;
        }
        candidate = round6((lo[i] + hi[i]) / 2);
        if (candidate <= lo[i] || candidate >= hi[i]) {  // the bracket is below the rounding step
          c.status = KneeStatus::kFound;
          active[i] = false;
          continue;
        }
      } else if (have_lo) {
        if (lo[i] >= spec.max) {
          c.status = KneeStatus::kAboveMax;
          active[i] = false;
          continue;
        }
        candidate = std::min(spec.max, round6(lo[i] * kGrowth));
      } else {
        if (hi[i] <= spec.min) {
          c.status = KneeStatus::kBelowMin;
          active[i] = false;
          continue;
        }
        candidate = std::max(spec.min, round6(hi[i] / kGrowth));
      }
      if (static_cast<int64_t>(c.probes.size()) >= spec.max_probes) {
        c.status = KneeStatus::kProbeLimit;
        active[i] = false;
        continue;
      }
      next[i] = candidate;
    }
  }
  result.runs = rounds.runs();
  result.reused = rounds.reused();
  return result;
}

CheapestResult run_cheapest(Experiment& experiment, const CapacityOptions& options) {
  CapacitySpec spec = experiment.capacity();
  if (options.target) spec.target = *options.target;
  if (options.cheapest_at) spec.cheapest_at = options.cheapest_at;
  if (!spec.cheapest_at)
    throw core::Error("the cheapest-configuration search needs a load: [capacity] cheapest_at = ... or --cheapest-at");
  if (!(*spec.cheapest_at > 0)) throw core::Error("--cheapest-at must be > 0");
  const Prepared prep = prepare(experiment, spec, options.jobs, false);

  CheapestResult result;
  result.load = *spec.cheapest_at;
  result.target = spec.target;
  result.slo_text = prep.slo;
  std::unique_ptr<ResultsDb> db;
  if (!options.db_path.empty()) {
    char settings[128];
    std::snprintf(settings, sizeof settings, "load=%.17g knob=%s", result.load, spec.knob.c_str());
    db = std::make_unique<ResultsDb>(options.db_path,
                                     record(experiment, "cheapest", spec_text(experiment, "cheapest v1") + settings));
  }
  Rounds rounds(experiment, db.get(), options);
  std::vector<std::vector<Point>> probes;
  std::vector<size_t> feasible;
  for (size_t i = 0; i < prep.configurations.size(); ++i) {
    if (!prep.infeasible[i].empty()) continue;
    feasible.push_back(i);
    probes.push_back(probe_points(experiment, prep.configurations[i], prep.knobs[i], result.load, spec.where));
  }
  const auto figures = rounds.run(probes, "cheapest");
  std::vector<ConfigurationCapacity> infeasible;
  for (size_t i = 0, k = 0; i < prep.configurations.size(); ++i) {
    ConfigurationCapacity c = configuration(prep, i);
    if (c.status == KneeStatus::kInfeasible) {
      infeasible.push_back(std::move(c));
      continue;
    }
    c.probes.push_back(pool(result.load, figures[k++], spec.target));
    c.status = KneeStatus::kFound;
    result.configurations.push_back(std::move(c));
  }
  std::stable_sort(result.configurations.begin(), result.configurations.end(),
                   [](const ConfigurationCapacity& a, const ConfigurationCapacity& b) {
                     return a.probes.front().usd_per_mtok_output < b.probes.front().usd_per_mtok_output;
                   });
  for (auto& c : infeasible) result.configurations.push_back(std::move(c));
  for (size_t i = 0; i < result.configurations.size(); ++i) {
    if (!result.configurations[i].probes.empty() && result.configurations[i].probes.front().pass) {
      result.best = i;
      break;
    }
  }
  result.runs = rounds.runs();
  result.reused = rounds.reused();
  return result;
}

}  // namespace servesim::experiments
