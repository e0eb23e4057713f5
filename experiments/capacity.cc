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
  std::vector<bool> auto_warmup;        // the probes add measurement.auto_warmup = true (no [measurement] given)
  std::vector<int64_t> max_requests;    // workload.max_requests (0: unset, the run cannot be lengthened)
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
    // Probes measure the steady state: the warm-up found by MSER-5, unless the experiment chose a window.
    const core::Params& m = config.section("measurement");
    bool chosen = false;
    for (const char* key : {"warmup_s", "warmup_requests", "cooldown_s", "cooldown_requests", "auto_warmup"})
      chosen = chosen || m.given(key);
    prep.auto_warmup.push_back(!chosen);
    const core::Params& w = config.section("workload");
    prep.max_requests.push_back(w.has("max_requests") ? w.get_int("max_requests") : 0);
  }
  return prep;
}

// The points of one probe: the configuration at `value`, once per seed (none: its own seed).
std::vector<Point> probe_points(const Experiment& experiment, const std::vector<Setting>& settings,
                                const std::string& knob, double value, const core::SourceLocation& where,
                                const std::vector<uint64_t>& seeds, bool auto_warmup, int64_t max_requests = 0) {
  std::vector<Point> out;
  std::vector<Setting> base = settings;
  if (auto_warmup) base.push_back(Setting{"measurement.auto_warmup", "true", where, where});
  if (max_requests > 0) base.push_back(Setting{"workload.max_requests", std::to_string(max_requests), where, where});
  base.push_back(Setting{knob, toml_float(value), where, where});
  auto add = [&](std::vector<Setting> s) {
    Point p;
    p.settings = std::move(s);
    const core::Params config = experiment.resolve(p.settings, "probe " + p.label());
    p.key = config_hash(config);
    p.seed = static_cast<uint64_t>(config.get_int("seed"));
    out.push_back(std::move(p));
  };
  if (seeds.empty()) {
    add(base);
  } else {
    for (uint64_t seed : seeds) {
      auto s = base;
      s.push_back(Setting{"seed", std::to_string(seed), experiment.seeds_where(), experiment.seeds_where()});
      add(std::move(s));
    }
  }
  return out;
}

Probe pool(double value, const std::vector<RunFigures>& runs, double target, bool require_stationary) {
  Probe p;
  p.value = value;
  double meeting = 0, total = 0, tokens = 0, cost = 0;
  for (const auto& f : runs) {
    meeting += f.slo_attainment_window * static_cast<double>(f.window_requests);
    total += static_cast<double>(f.window_requests);
    const double window_tokens = f.throughput_output_tok_s_window * f.arrival_window_s;
    tokens += window_tokens;
    cost += f.cost_usd_per_mtok_output_window * window_tokens / 1e6;
    p.stationary = p.stationary && f.stationary;
    p.settled = p.settled && f.settled;
    p.trend_req_s += f.in_system_trend_req_s;
    p.goodput_req_s += f.goodput_req_s_window;
    p.offered_req_s += f.offered_req_s;
    p.throughput_output_tok_s += f.throughput_output_tok_s_window;
    p.ttft_ms_p90 += f.ttft_ms_window_p90;
    p.tpot_ms_p90 += f.tpot_ms_window_p90;
    if (f.sim_seconds > 0) p.gpus += f.gpu_hours * 3600.0 / f.sim_seconds;
    p.run_ids.push_back(f.run_id);
  }
  const double n = static_cast<double>(std::max<size_t>(1, runs.size()));
  p.trend_req_s /= n;
  p.goodput_req_s /= n;
  p.offered_req_s /= n;
  p.throughput_output_tok_s /= n;
  p.ttft_ms_p90 /= n;
  p.tpot_ms_p90 /= n;
  p.gpus /= n;
  p.slo_attainment = total > 0 ? meeting / total : 0;
  p.usd_per_mtok_output = tokens > 0 ? cost / tokens * 1e6 : 0;
  // One run: $/1M tokens is the window's cost over its token throughput, so the batch-means
  // interval of the throughput bounds it.
  if (runs.size() == 1) {
    const double thr = runs[0].throughput_output_tok_s_window, hw = runs[0].throughput_output_tok_s_window_ci95;
    if (thr > 0 && !std::isnan(hw)) {
      p.usd_lo = p.usd_per_mtok_output * thr / (thr + hw);
      p.usd_hi = thr > hw ? p.usd_per_mtok_output * thr / (thr - hw) : std::numeric_limits<double>::infinity();
    }
  }
  // Settled, or at least not growing: whether the second is enough is the search's call (run_capacity).
  p.pass = p.slo_attainment >= target && (p.stationary || !require_stationary);
  return p;
}

// The first cliff at or above the knee among a search's probes (0 attainment for a queue that is not
// stationary), or none.
std::optional<Cliff> find_cliff(const Search& search, double slope_threshold, bool require_stationary) {
  std::vector<const Probe*> sorted;
  for (const Probe& p : search.probes)
    if (!p.superseded) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(), [](const Probe* a, const Probe* b) { return a->value < b->value; });
  auto effective = [&](const Probe& p) { return p.stationary || !require_stationary ? p.slo_attainment : 0.0; };
  const double floor = search.knee ? search.knee->value : 0;
  for (size_t i = 1; i < sorted.size(); ++i) {
    const Probe& a = *sorted[i - 1];
    const Probe& b = *sorted[i];
    if (a.value < floor || b.value <= a.value) continue;
    const double drop = effective(a) - effective(b);
    const double slope = 100 * drop / (100 * (b.value - a.value) / a.value);  // points per 1%
    if (slope > slope_threshold) return Cliff{a.value, b.value, effective(a), effective(b), slope};
  }
  return std::nullopt;
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

std::string Probe::why() const {
  if (pass) return "";
  if (superseded) return "not settled";
  return stationary ? "attainment" : "not stationary";
}

std::string knob_meaning(const std::string& knob) {
  if (knob == "workload.rate" || knob == "workload.arrival.rate") return "arrival rate (req/s)";
  if (knob == "workload.rate_scale") return "replay speed (x the trace's recorded rate)";
  return knob;
}

std::string knob_header(const std::string& knob) {
  if (knob == "workload.rate" || knob == "workload.arrival.rate") return "max rate";
  if (knob == "workload.rate_scale") return "max replay speed";
  return "max " + knob.substr(knob.rfind('.') + 1);
}

std::string capacity_table(const CapacityResult& r) {
  auto v = [](double x) { return std::isfinite(x) ? core::format_double(x) : std::string(); };
  std::string out = std::string(kCapacityTableHeader) + "\n";
  for (const auto& c : r.configurations) {
    // The interval: across replications, or the search's own bracket [knee, lowest failing].
    double lo = c.range_lo, hi = c.range_hi;
    if (c.knee && (std::isnan(lo) || std::isnan(hi))) {
      lo = c.knee->value;
      hi = c.lowest_failing;
    }
    std::string label = c.label;
    for (char& ch : label)
      if (ch == '\t' || ch == '\n') ch = ' ';
    out += label + "\t" + c.knob + "\t" + knee_status_text(c.status) + "\t" + (c.knee ? v(c.knee->value) : "") +
           "\t" + (c.knee ? v(lo) : "") + "\t" + (c.knee ? v(hi) : "") + "\t" + v(c.lowest_failing) + "\t" +
           (c.cliff ? v(c.cliff->from) : "") + "\t" + v(c.margin) + "\t" + std::to_string(r.replications) + "\t" +
           v(r.target) + "\n";
  }
  return out;
}

std::vector<HeadroomPair> headroom_pairs(const std::vector<ConfigurationCapacity>& configurations) {
  // The headroom axis is the last: all up and one down are neighbours, in that order.
  std::vector<HeadroomPair> pairs;
  for (size_t i = 0; i + 1 < configurations.size(); i += 2) {
    const ConfigurationCapacity& up = configurations[i];
    const ConfigurationCapacity& down = configurations[i + 1];
    HeadroomPair p;
    p.all_up = i;
    p.one_down = i + 1;
    std::vector<Setting> others;
    for (const Setting& s : up.settings)
      if (s.axis_name != "headroom") others.push_back(s);
    p.label = settings_label(others);
    if (up.knee && down.knee && up.knee->value > 0) p.kept = down.knee->value / up.knee->value;
    if (up.knee && down.knee && up.knee->usd_per_mtok_output > 0)
      p.cost = down.knee->usd_per_mtok_output / up.knee->usd_per_mtok_output - 1;
    pairs.push_back(std::move(p));
  }
  return pairs;
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
  result.require_stationary = spec.require_stationary;
  result.cliff_slope = spec.cliff_slope;
  result.replications = experiment.replications();
  result.slo_text = prep.slo;

  std::unique_ptr<ResultsDb> db;
  if (!options.db_path.empty()) {
    char settings[320];
    std::snprintf(settings, sizeof settings,
                  "target=%.17g tolerance=%.17g min=%.17g max=%.17g probes=%lld knob=%s stationary=%d replications=%lld "
                  "extend=%lld",
                  spec.target, spec.tolerance, spec.min, spec.max, static_cast<long long>(spec.max_probes),
                  spec.knob.c_str(), spec.require_stationary ? 1 : 0, static_cast<long long>(result.replications),
                  static_cast<long long>(spec.extend_up_to));
    std::string starts;
    for (double s : prep.starts) starts += core::format_double(s) + " ";
    db = std::make_unique<ResultsDb>(
        options.db_path, record(experiment, "capacity", spec_text(experiment, "capacity v2") + settings + "\n" + starts));
  }
  Rounds rounds(experiment, db.get(), options);

  // The searches: one per configuration (its seeds pooled in each probe), or one per configuration
  // and replication.
  const size_t n = prep.configurations.size();
  struct Unit {
    size_t configuration = 0;
    Search search;
    double next = 0, lo = 0, hi = std::numeric_limits<double>::infinity();
    int64_t factor = 1;  // runs of workload.max_requests x factor
    bool active = true;
  };
  std::vector<Unit> units;
  for (size_t i = 0; i < n; ++i) {
    ConfigurationCapacity c = configuration(prep, i);
    const bool feasible = c.status != KneeStatus::kInfeasible;
    result.configurations.push_back(std::move(c));
    if (!feasible) continue;
    if (result.replications > 0) {
      for (uint64_t seed : experiment.seeds()) {
        Unit u;
        u.configuration = i;
        u.search.seeds = {seed};
        u.next = prep.starts[i];
        units.push_back(std::move(u));
      }
    } else {
      Unit u;
      u.configuration = i;
      u.search.seeds = experiment.seeds();
      u.next = prep.starts[i];
      units.push_back(std::move(u));
    }
  }
  for (int round = 1;; ++round) {
    std::vector<size_t> which;
    std::vector<std::vector<Point>> probes;
    for (size_t k = 0; k < units.size(); ++k) {
      if (!units[k].active) continue;
      const size_t i = units[k].configuration;
      which.push_back(k);
      probes.push_back(probe_points(experiment, prep.configurations[i], prep.knobs[i], units[k].next, spec.where,
                                    units[k].search.seeds, prep.auto_warmup[i],
                                    units[k].factor > 1 ? prep.max_requests[i] * units[k].factor : 0));
    }
    if (which.empty()) break;
    const auto figures = rounds.run(probes, "capacity round " + std::to_string(round));
    for (size_t w = 0; w < which.size(); ++w) {
      Unit& u = units[which[w]];
      Search& c = u.search;
      Probe p = pool(u.next, figures[w], spec.target, spec.require_stationary);
      const int64_t base_requests = prep.max_requests[u.configuration];
      p.max_requests = base_requests * u.factor;
      // Met the target without settling: maybe only too short to tell. Run it again, twice as long,
      // while the length allows; past it, no significant growth passes (p.pass as pooled).
      if (spec.require_stationary && p.slo_attainment >= spec.target && !p.settled) {
        if (base_requests > 0 && base_requests * u.factor * 2 <= spec.extend_up_to) {
          p.pass = false;
          p.superseded = true;
          c.probes.push_back(p);
          u.factor *= 2;
          continue;
        }
        p.extended_to_limit = base_requests > 0;
      }
      c.probes.push_back(p);
      if (p.pass) {
        u.lo = p.value;
        c.knee = p;
      } else {
        u.hi = p.value;
        c.lowest_failing = p.value;
      }
      const bool have_lo = c.knee.has_value(), have_hi = std::isfinite(u.hi);
      double candidate = 0;
      if (have_lo && have_hi) {
        if (u.hi - u.lo <= spec.tolerance * u.lo) {
          c.status = KneeStatus::kFound;
          u.active = false;
          continue;
        }
        candidate = round6((u.lo + u.hi) / 2);
        if (candidate <= u.lo || candidate >= u.hi) {  // the bracket is below the rounding step
          c.status = KneeStatus::kFound;
          u.active = false;
          continue;
        }
      } else if (have_lo) {
        if (u.lo >= spec.max) {
          c.status = KneeStatus::kAboveMax;
          u.active = false;
          continue;
        }
        candidate = std::min(spec.max, round6(u.lo * kGrowth));
      } else {
        if (u.hi <= spec.min) {
          c.status = KneeStatus::kBelowMin;
          u.active = false;
          continue;
        }
        candidate = std::max(spec.min, round6(u.hi / kGrowth));
      }
      int64_t counted = 0;
      for (const Probe& q : c.probes) counted += q.superseded ? 0 : 1;
      if (counted >= spec.max_probes) {
        c.status = KneeStatus::kProbeLimit;
        u.active = false;
        continue;
      }
      u.next = candidate;
    }
  }

  // Each configuration from its search, or from its replications' searches.
  for (Unit& u : units) u.search.cliff = find_cliff(u.search, spec.cliff_slope, spec.require_stationary);
  for (size_t i = 0; i < n; ++i) {
    ConfigurationCapacity& c = result.configurations[i];
    std::vector<Search*> searches;
    for (Unit& u : units)
      if (u.configuration == i) searches.push_back(&u.search);
    if (searches.empty()) continue;
    if (result.replications == 0) {
      Search& s = *searches.front();
      c.probes = s.probes;
      c.status = s.status;
      c.knee = s.knee;
      c.lowest_failing = s.lowest_failing;
      c.cliff = s.cliff;
      if (c.knee) c.sustainable = metrics::t_interval(std::vector<double>{c.knee->value});
    } else {
      c.status = KneeStatus::kFound;
      std::vector<double> knees, fails;
      std::vector<Probe> knee_probes;
      double failing = 0;
      for (Search* s : searches) {
        fails.push_back(s->lowest_failing);
        c.replications.push_back(*s);
        if (s->status != KneeStatus::kFound && c.status == KneeStatus::kFound) c.status = s->status;
        if (s->knee) {
          knees.push_back(s->knee->value);
          knee_probes.push_back(*s->knee);
        }
        failing += s->lowest_failing;
        if (s->cliff && (!c.cliff || s->cliff->from < c.cliff->from)) c.cliff = s->cliff;
      }
      c.lowest_failing = failing / static_cast<double>(searches.size());
      if (knees.size() == searches.size()) {
        c.sustainable = metrics::t_interval(knees);
        c.range_lo = c.sustainable.lo();
        const metrics::Interval f = metrics::t_interval(fails);
        c.range_hi = std::isfinite(f.mean) ? std::max(c.sustainable.hi(), f.hi()) : c.sustainable.hi();
        Probe mean;
        mean.value = c.sustainable.mean;
        mean.pass = true;
        const double k = static_cast<double>(knee_probes.size());
        for (const Probe& p : knee_probes) {
          mean.slo_attainment += p.slo_attainment / k;
          mean.goodput_req_s += p.goodput_req_s / k;
          mean.offered_req_s += p.offered_req_s / k;
          mean.throughput_output_tok_s += p.throughput_output_tok_s / k;
          mean.usd_per_mtok_output += p.usd_per_mtok_output / k;
          mean.gpus += p.gpus / k;
          mean.ttft_ms_p90 += p.ttft_ms_p90 / k;
          mean.tpot_ms_p90 += p.tpot_ms_p90 / k;
          mean.trend_req_s += p.trend_req_s / k;
          mean.run_ids.insert(mean.run_ids.end(), p.run_ids.begin(), p.run_ids.end());
        }
        c.knee = mean;
      }
    }
    if (result.replications == 0) {
      if (c.knee && c.cliff) c.margin = (c.cliff->from - c.knee->value) / c.knee->value;
    } else if (c.knee) {
      // The smallest of the replications' margins, each to its own cliff (the mean knee may lie
      // above one replication's cliff).
      for (Search* s : searches)
        if (s->knee && s->cliff) {
          const double m = (s->cliff->from - s->knee->value) / s->knee->value;
          c.margin = std::isnan(c.margin) ? m : std::min(c.margin, m);
        }
    }
  }
  result.runs = rounds.runs();
  result.reused = rounds.reused();
  result.headroom = experiment.capacity().headroom;
  if (!result.headroom.empty()) result.pairs = headroom_pairs(result.configurations);
  if (db) db->put_experiment_value("capacity_result", capacity_table(result));
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
  result.replications = experiment.replications();
  result.interval_method = result.replications > 0
                               ? "95% Student t over " + std::to_string(result.replications) +
                                     " replications; configurations compared by the paired interval of their difference"
                               : "95%, from the batch-means interval of each run's window token throughput; "
                                 "configurations whose intervals overlap cannot be told apart";
  std::unique_ptr<ResultsDb> db;
  if (!options.db_path.empty()) {
    char settings[160];
    std::snprintf(settings, sizeof settings, "load=%.17g knob=%s stationary=%d", result.load, spec.knob.c_str(),
                  spec.require_stationary ? 1 : 0);
    db = std::make_unique<ResultsDb>(options.db_path,
                                     record(experiment, "cheapest", spec_text(experiment, "cheapest v2") + settings));
  }
  Rounds rounds(experiment, db.get(), options);
  std::vector<std::vector<Point>> probes;
  for (size_t i = 0; i < prep.configurations.size(); ++i) {
    if (!prep.infeasible[i].empty()) continue;
    probes.push_back(probe_points(experiment, prep.configurations[i], prep.knobs[i], result.load, spec.where,
                                  experiment.seeds(), prep.auto_warmup[i]));
  }
  const auto figures = rounds.run(probes, "cheapest");
  // Per configuration: its pooled probe, and each replication's $/1M tokens (by seed, in order).
  std::vector<ConfigurationCapacity> infeasible;
  std::vector<std::pair<ConfigurationCapacity, std::vector<double>>> rows;
  for (size_t i = 0, k = 0; i < prep.configurations.size(); ++i) {
    ConfigurationCapacity c = configuration(prep, i);
    if (c.status == KneeStatus::kInfeasible) {
      infeasible.push_back(std::move(c));
      continue;
    }
    const std::vector<RunFigures>& runs = figures[k++];
    Probe p = pool(result.load, runs, spec.target, spec.require_stationary);
    std::vector<double> costs;
    for (const RunFigures& f : runs) costs.push_back(f.cost_usd_per_mtok_output_window);
    if (result.replications > 0) {
      const metrics::Interval i = metrics::t_interval(costs);
      p.usd_lo = i.lo();
      p.usd_hi = i.hi();
    }
    c.probes.push_back(p);
    c.status = KneeStatus::kFound;
    rows.emplace_back(std::move(c), std::move(costs));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.first.probes.front().usd_per_mtok_output < b.first.probes.front().usd_per_mtok_output;
  });
  for (size_t i = 0; i < rows.size(); ++i) {
    bool tied = false;
    if (i > 0) {
      const Probe& above = rows[i - 1].first.probes.front();
      const Probe& me = rows[i].first.probes.front();
      if (result.replications > 0) {
        // The same seeds draw the same arrivals for both: compare them replication by replication.
        std::vector<double> diff;
        for (size_t r = 0; r < rows[i].second.size(); ++r) diff.push_back(rows[i].second[r] - rows[i - 1].second[r]);
        tied = metrics::t_interval(diff).contains(0.0);
      } else if (!std::isnan(above.usd_hi) && !std::isnan(me.usd_lo)) {
        tied = me.usd_lo <= above.usd_hi;
      }
    }
    result.tied_with_above.push_back(tied);
  }
  for (auto& row : rows) result.configurations.push_back(std::move(row.first));
  for (auto& c : infeasible) {
    result.configurations.push_back(std::move(c));
    result.tied_with_above.push_back(false);
  }
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
