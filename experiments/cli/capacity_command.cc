// servesim capacity: the highest arrival rate each configuration sustains under its SLO, or the
// cheapest configuration that meets the SLO at a given load.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "experiments/capacity.h"
#include "experiments/cli/command.h"
#include "experiments/experiment.h"
#include "sim/core/format.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

std::string value_text(double v) {
  if (!std::isfinite(v)) return "-";
  return core::format_double(v);
}

nlohmann::ordered_json probe_json(const Probe& p) {
  return {{"value", p.value},
          {"slo_attainment", p.slo_attainment},
          {"pass", p.pass},
          {"goodput_req_s", p.goodput_req_s},
          {"offered_req_s", p.offered_req_s},
          {"throughput_output_tok_s", p.throughput_output_tok_s},
          {"usd_per_mtok_output", p.usd_per_mtok_output},
          {"gpus", p.gpus},
          {"ttft_ms_p90", p.ttft_ms_p90},
          {"tpot_ms_p90", p.tpot_ms_p90},
          {"run_ids", p.run_ids}};
}

nlohmann::ordered_json configuration_json(const ConfigurationCapacity& c) {
  nlohmann::ordered_json j;
  j["configuration"] = c.label;
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();
  for (const auto& s : c.settings) settings[s.key] = s.display_value();
  j["settings"] = settings;
  j["knob"] = c.knob;
  j["status"] = knee_status_text(c.status);
  if (!c.infeasible.empty()) j["infeasible"] = c.infeasible;
  j["max_value"] = c.knee ? nlohmann::ordered_json(c.knee->value) : nlohmann::ordered_json();
  j["lowest_failing"] = std::isfinite(c.lowest_failing) ? nlohmann::ordered_json(c.lowest_failing) : nlohmann::ordered_json();
  j["knee"] = c.knee ? probe_json(*c.knee) : nlohmann::ordered_json();
  nlohmann::ordered_json probes = nlohmann::ordered_json::array();
  for (const auto& p : c.probes) probes.push_back(probe_json(p));
  j["probes"] = probes;
  return j;
}

// `j` with the rows of every configuration and the run counts both modes report.
nlohmann::ordered_json& with_configurations(nlohmann::ordered_json& j, const std::vector<ConfigurationCapacity>& configurations,
                                            int64_t runs, int64_t reused) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& c : configurations) rows.push_back(configuration_json(c));
  j["configurations"] = rows;
  j["runs"] = runs;
  j["reused"] = reused;
  return j;
}

void print_capacity(std::ostream& out, const CapacityResult& r) {
  const std::string knob = r.configurations.empty() ? "rate" : r.configurations.front().knob;
  out << "capacity: highest " << knob << " with SLO attainment >= " << percent(r.target) << " (" << r.slo_text
      << "), to a tolerance of " << fixed(r.tolerance * 100, 1) << "%; " << r.runs << " runs";
  if (r.reused) out << ", " << r.reused << " reused from the database";
  out << "\n\n";
  out << std::right << std::setw(12) << "max " + (knob.size() > 12 ? "rate" : knob.substr(knob.rfind('.') + 1))
      << std::setw(12) << "fails at" << std::setw(8) << "probes" << std::setw(9) << "SLO" << std::setw(11) << "req/s"
      << std::setw(11) << "goodput" << std::setw(11) << "$/1M tok" << "  configuration\n";
  for (const auto& c : r.configurations) {
    out << std::setw(12) << (c.knee ? value_text(c.knee->value) : "-") << std::setw(12) << value_text(c.lowest_failing)
        << std::setw(8) << c.probes.size();
    if (c.knee)
      out << std::setw(9) << percent(c.knee->slo_attainment) << std::setw(11) << fixed(c.knee->offered_req_s, 2)
          << std::setw(11) << fixed(c.knee->goodput_req_s, 2) << std::setw(11) << fixed(c.knee->usd_per_mtok_output, 3);
    else
      out << std::setw(9) << "-" << std::setw(11) << "-" << std::setw(11) << "-" << std::setw(11) << "-";
    out << "  " << c.label;
    if (c.status != KneeStatus::kFound) out << "  [" << knee_status_text(c.status) << (c.infeasible.empty() ? "" : ": " + c.infeasible) << "]";
    out << "\n";
  }
  out << "\n(SLO, req/s, goodput and $/1M output tokens are those of the highest passing probe; req/s is the\n"
         "offered arrival rate, goodput the requests meeting the SLO per simulated second)\n";
}

void print_cheapest(std::ostream& out, const CheapestResult& r) {
  const std::string knob = r.configurations.empty() ? "rate" : r.configurations.front().knob;
  out << "cheapest configuration meeting SLO attainment >= " << percent(r.target) << " (" << r.slo_text << ") at "
      << knob << " = " << core::format_double(r.load) << "; " << r.runs << " runs";
  if (r.reused) out << ", " << r.reused << " reused from the database";
  out << "\n\n";
  out << std::right << std::setw(11) << "$/1M tok" << std::setw(7) << "GPUs" << std::setw(9) << "SLO" << std::setw(6)
      << "meets" << std::setw(11) << "req/s" << std::setw(11) << "goodput" << std::setw(11) << "TTFT p90"
      << std::setw(11) << "TPOT p90" << "  configuration\n";
  for (size_t i = 0; i < r.configurations.size(); ++i) {
    const auto& c = r.configurations[i];
    if (c.probes.empty()) {
      out << std::setw(11) << "-" << std::setw(7) << "-" << std::setw(9) << "-" << std::setw(6) << "-" << std::setw(11)
          << "-" << std::setw(11) << "-" << std::setw(11) << "-" << std::setw(11) << "-" << "  " << c.label
          << "  [infeasible: " << c.infeasible << "]\n";
      continue;
    }
    const Probe& p = c.probes.front();
    out << std::setw(11) << fixed(p.usd_per_mtok_output, 3) << std::setw(7) << fixed(p.gpus, 0) << std::setw(9)
        << percent(p.slo_attainment) << std::setw(6) << (p.pass ? "yes" : "no") << std::setw(11)
        << fixed(p.offered_req_s, 2) << std::setw(11) << fixed(p.goodput_req_s, 2) << std::setw(11)
        << fixed(p.ttft_ms_p90, 1) << std::setw(11) << fixed(p.tpot_ms_p90, 2) << "  " << c.label
        << (r.best && *r.best == i ? "  <= cheapest" : "") << "\n";
  }
  out << "\n";
  if (r.best) {
    const auto& c = r.configurations[*r.best];
    out << "cheapest: " << c.label << " at $" << fixed(c.probes.front().usd_per_mtok_output, 3)
        << " per 1M output tokens (SLO attainment " << percent(c.probes.front().slo_attainment) << ")\n";
  } else {
    out << "no configuration meets the SLO target at this load\n";
  }
}

int cmd_capacity(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description opts("servesim capacity options");
  std::string experiment_path, db;
  int jobs = 0;
  double target = 0, tolerance = 0, cheapest_at = 0, interval = 10;
  opts.add_options()
      ("help,h", "this help")
      ("experiment", po::value<std::string>(&experiment_path), "the experiment file (TOML)")
      ("db", po::value<std::string>(&db), "keep every probe's run in this results database (resumable)")
      ("jobs,j", po::value<int>(&jobs)->default_value(0), "simulations in parallel (0 = all cores)")
      ("target", po::value<double>(&target), "SLO attainment to sustain, a fraction (default [capacity] target, 0.9)")
      ("tolerance", po::value<double>(&tolerance), "relative width of the final bracket (default [capacity] tolerance, 0.02)")
      ("cheapest-at", po::value<double>(&cheapest_at),
       "instead: run every configuration at this knob value and name the cheapest that meets the SLO")
      ("json", "print the result as one JSON object")
      ("progress-interval", po::value<double>(&interval)->default_value(10),
       "seconds between progress lines when stderr is not a terminal")
      ("quiet,q", "no progress output");
  const po::variables_map vm = parse_options(args, opts, "experiment");
  if (vm.count("help")) {
    out << "usage: servesim capacity EXPERIMENT.toml [options]\n\n" << opts << "\n";
    return 0;
  }
  if (experiment_path.empty()) throw UsageError("capacity needs an experiment file: servesim capacity EXPERIMENT.toml");
  resolve_jobs(jobs);
  if (vm.count("target")) require_option("--target", target, 0, 1, "SLO attainment to sustain, a fraction", true);
  if (vm.count("tolerance"))
    require_option("--tolerance", tolerance, 1e-4, 0.999, "relative width of the final bracket, e.g. 0.02");
  if (vm.count("cheapest-at"))
    require_option("--cheapest-at", cheapest_at, 0, 1e12, "the load every configuration is costed at", true);
  require_option("--progress-interval", interval, 0, 1e6, "seconds between progress lines", true);
  CapacityOptions options;
  options.db_path = db;
  options.jobs = jobs;
  if (vm.count("target")) options.target = target;
  if (vm.count("tolerance")) options.tolerance = tolerance;
  if (vm.count("cheapest-at")) options.cheapest_at = cheapest_at;
  options.progress = vm.count("quiet") ? nullptr : &err;
  options.progress_tty = &err == &std::cerr && ::isatty(STDERR_FILENO) == 1;
  options.progress_period_s = interval;

  Experiment experiment = Experiment::load(experiment_path);
  check_experiment_outputs(experiment, experiment_path, db);
  const bool cheapest = options.cheapest_at.has_value() || experiment.capacity().cheapest_at.has_value();
  if (cheapest) {
    const CheapestResult r = run_cheapest(experiment, options);
    if (vm.count("json")) {
      nlohmann::ordered_json j;
      j["mode"] = "cheapest";
      j["load"] = r.load;
      j["target"] = r.target;
      j["slo"] = r.slo_text;
      j["cheapest"] = r.best ? nlohmann::ordered_json(r.configurations[*r.best].label) : nlohmann::ordered_json();
      out << with_configurations(j, r.configurations, r.runs, r.reused).dump() << "\n";
    } else {
      print_cheapest(out, r);
    }
    return 0;
  }
  const CapacityResult r = run_capacity(experiment, options);
  if (vm.count("json")) {
    nlohmann::ordered_json j;
    j["mode"] = "capacity";
    j["target"] = r.target;
    j["tolerance"] = r.tolerance;
    j["slo"] = r.slo_text;
    out << with_configurations(j, r.configurations, r.runs, r.reused).dump() << "\n";
  } else {
    print_capacity(out, r);
  }
  return 0;
}

const bool kRegistered = register_command(
    {"capacity", "EXPERIMENT.toml [--db FILE] [--jobs N] [--target F] [--tolerance F] [--cheapest-at X] [--json]",
     "per configuration of an experiment, the highest arrival rate (workload.rate or rate_scale) whose SLO\n"
     "attainment stays >= the target (bracketing + bisection); or, with --cheapest-at, the configuration\n"
     "with the lowest $/1M output tokens that meets the SLO at that load",
     cmd_capacity});

}  // namespace
}  // namespace servesim::experiments
