// servesim capacity: the highest arrival rate each configuration sustains under its SLO, or the
// cheapest configuration that meets the SLO at a given load.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <optional>
#include <iostream>
#include <sstream>
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
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);  // the search's values have six significant digits (round6)
  return text;
}

nlohmann::ordered_json number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
}

nlohmann::ordered_json probe_json(const Probe& p) {
  return {{"value", p.value},
          {"slo_attainment", p.slo_attainment},
          {"stationary", p.stationary},
          {"settled", p.settled},
          {"max_requests", p.max_requests},
          {"extended_to_limit", p.extended_to_limit},
          {"pass", p.pass},
          {"why", p.why().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(p.why())},
          {"in_system_trend_req_s", p.trend_req_s},
          {"goodput_req_s", p.goodput_req_s},
          {"offered_req_s", p.offered_req_s},
          {"throughput_output_tok_s", p.throughput_output_tok_s},
          {"usd_per_mtok_output", p.usd_per_mtok_output},
          {"usd_per_mtok_output_ci95", {number(p.usd_lo), number(p.usd_hi)}},
          {"gpus", p.gpus},
          {"ttft_ms_p90", p.ttft_ms_p90},
          {"tpot_ms_p90", p.tpot_ms_p90},
          {"run_ids", p.run_ids}};
}

nlohmann::ordered_json cliff_json(const std::optional<Cliff>& c) {
  if (!c) return nullptr;
  return {{"from", c->from},
          {"to", c->to},
          {"attainment_from", c->attainment_from},
          {"attainment_to", c->attainment_to},
          {"points_per_percent", c->slope}};
}

nlohmann::ordered_json search_json(const Search& s) {
  nlohmann::ordered_json j;
  j["seeds"] = s.seeds;
  j["status"] = knee_status_text(s.status);
  j["max_value"] = s.knee ? nlohmann::ordered_json(s.knee->value) : nlohmann::ordered_json();
  j["lowest_failing"] = number(s.lowest_failing);
  j["cliff"] = cliff_json(s.cliff);
  nlohmann::ordered_json probes = nlohmann::ordered_json::array();
  for (const auto& p : s.probes) probes.push_back(probe_json(p));
  j["probes"] = probes;
  return j;
}

nlohmann::ordered_json configuration_json(const ConfigurationCapacity& c) {
  nlohmann::ordered_json j;
  j["configuration"] = c.label;
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();
  for (const auto& s : c.settings) settings[s.key] = s.display_value();
  j["settings"] = settings;
  j["knob"] = c.knob;
  j["knob_meaning"] = knob_meaning(c.knob);
  j["status"] = knee_status_text(c.status);
  if (!c.infeasible.empty()) j["infeasible"] = c.infeasible;
  j["max_value"] = c.knee ? nlohmann::ordered_json(c.knee->value) : nlohmann::ordered_json();
  j["sustainable"] = c.knee ? nlohmann::ordered_json{{"mean", c.sustainable.mean},
                                                     {"ci95_low", number(c.sustainable.lo())},
                                                     {"ci95_high", number(c.sustainable.hi())},
                                                     {"range_low", number(c.range_lo)},
                                                     {"range_high", number(c.range_hi)},
                                                     {"replications", c.sustainable.n}}
                            : nlohmann::ordered_json();
  j["lowest_failing"] = number(c.lowest_failing);
  j["cliff"] = cliff_json(c.cliff);
  j["margin_to_cliff"] = number(c.margin);
  j["knee"] = c.knee ? probe_json(*c.knee) : nlohmann::ordered_json();
  nlohmann::ordered_json probes = nlohmann::ordered_json::array();
  for (const auto& p : c.probes) probes.push_back(probe_json(p));
  j["probes"] = probes;
  if (!c.replications.empty()) {
    nlohmann::ordered_json reps = nlohmann::ordered_json::array();
    for (const auto& s : c.replications) reps.push_back(search_json(s));
    j["replications"] = reps;
  }
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

std::string range_text(double lo, double hi, int digits) {
  if (std::isnan(lo) || std::isnan(hi)) return "-";
  std::ostringstream s;
  s << "[" << fixed(lo, digits) << ", " << (std::isfinite(hi) ? fixed(hi, digits) : std::string("inf")) << "]";
  return s.str();
}

void print_capacity(std::ostream& out, const CapacityResult& r) {
  const std::string knob = r.configurations.empty() ? "workload.rate" : r.configurations.front().knob;
  out << "capacity: highest " << knob << " (" << knob_meaning(knob) << ") with steady-state SLO attainment >= "
      << percent(r.target) << " (" << r.slo_text << ")" << (r.require_stationary ? " and a stationary queue" : "")
      << ", to a tolerance of " << fixed(r.tolerance * 100, 1) << "%; ";
  if (r.replications > 0) out << r.replications << " replications searched each; ";
  out << r.runs << " runs";
  if (r.reused) out << ", " << r.reused << " reused from the database";
  out << "\n\n";
  const std::string header = knob_header(knob);
  out << std::right << std::setw(std::max<int>(12, static_cast<int>(header.size()) + 1)) << header << std::setw(22)
      << "95% interval" << std::setw(11) << "fails at" << std::setw(8) << "probes" << std::setw(9) << "SLO"
      << std::setw(10) << "req/s" << std::setw(10) << "goodput" << std::setw(10) << "$/1M tok" << "  "
      << std::left << std::setw(34) << "cliff (attainment)" << std::right << std::setw(8) << "margin"
      << "  configuration\n";
  const int width = std::max<int>(12, static_cast<int>(header.size()) + 1);
  for (const auto& c : r.configurations) {
    size_t probes = c.probes.size();
    for (const auto& s : c.replications) probes += s.probes.size();
    out << std::setw(width) << (c.knee ? value_text(c.knee->value) : "-") << std::setw(22)
        << (c.knee ? range_text(c.range_lo, c.range_hi, 4) : "-")
        << std::setw(11) << value_text(c.lowest_failing) << std::setw(8) << probes;
    if (c.knee)
      out << std::setw(9) << percent(c.knee->slo_attainment) << std::setw(10) << fixed(c.knee->offered_req_s, 2)
          << std::setw(10) << fixed(c.knee->goodput_req_s, 2) << std::setw(10) << fixed(c.knee->usd_per_mtok_output, 3);
    else
      out << std::setw(9) << "-" << std::setw(10) << "-" << std::setw(10) << "-" << std::setw(10) << "-";
    std::string cliff = "-";
    if (c.cliff) {
      std::ostringstream text;
      text << value_text(c.cliff->from) << " -> " << value_text(c.cliff->to) << " (" << percent(c.cliff->attainment_from)
           << " -> " << percent(c.cliff->attainment_to) << ")";
      cliff = text.str();
    }
    out << "  " << std::left << std::setw(34) << cliff << std::right << std::setw(8)
        << (std::isnan(c.margin) ? std::string("-") : percent(c.margin)) << "  " << c.label;
    if (c.status != KneeStatus::kFound) out << "  [" << knee_status_text(c.status) << (c.infeasible.empty() ? "" : ": " + c.infeasible) << "]";
    out << "\n";
  }
  out << "\n(" << header << ": the highest " << knob_meaning(knob) << " that passed";
  if (r.replications > 0)
    out << ", the mean over the replications; 95% interval: from the Student-t interval of their knees to that of\n"
           "their lowest failing probes, the replications' spread and the search's resolution";
  out << ". SLO, req/s, goodput and $/1M output tokens are those of the passing probe over its measurement window;\n"
         "req/s is the offered arrival rate. A probe fails when its attainment misses the target or its queue still grows.\n"
         "cliff: where attainment (0 for a growing queue) falls faster than "
      << core::format_double(r.cliff_slope) << " points per 1% more load; margin: how far below it the answer sits)\n";
}

// N+1: each configuration's capacity all up and with one replica (node) down, and what the headroom costs.
void print_headroom(std::ostream& out, const CapacityResult& r) {
  if (r.headroom.empty()) return;
  const std::vector<ConfigurationCapacity>& c = r.configurations;
  const std::string down = r.headroom == "node" ? "one node down" : "one replica down";
  out << "\nN+1 headroom: the SLO must hold with " << down << " (down for the whole run, still paid for)\n";
  out << std::right << std::setw(12) << "all up" << std::setw(18) << down << std::setw(10) << "kept" << std::setw(15)
      << "$/1M all up" << std::setw(15) << "$/1M N+1" << std::setw(15) << "headroom cost" << "  configuration\n";
  for (const HeadroomPair& p : r.pairs) {
    const auto& up = c[p.all_up].knee;
    const auto& dn = c[p.one_down].knee;
    out << std::setw(12) << (up ? value_text(up->value) : "-") << std::setw(18) << (dn ? value_text(dn->value) : "-")
        << std::setw(10) << (std::isnan(p.kept) ? std::string("-") : percent(p.kept)) << std::setw(15)
        << (up ? fixed(up->usd_per_mtok_output, 4) : "-") << std::setw(15) << (dn ? fixed(dn->usd_per_mtok_output, 4) : "-")
        << std::setw(15) << (std::isnan(p.cost) ? std::string("-") : "+" + percent(p.cost)) << "  " << p.label << "\n";
  }
  out << "(kept: the rate sustained with " << down << " over the rate all up; headroom cost: the extra $ per 1M\n"
         "output tokens of serving only the N+1 rate on the same GPUs)\n";
}

void print_cheapest(std::ostream& out, const CheapestResult& r) {
  const std::string knob = r.configurations.empty() ? "rate" : r.configurations.front().knob;
  out << "cheapest configuration meeting steady-state SLO attainment >= " << percent(r.target) << " (" << r.slo_text
      << ") at " << knob << " = " << core::format_double(r.load) << " (" << knob_meaning(knob) << "); " << r.runs
      << " runs";
  if (r.reused) out << ", " << r.reused << " reused from the database";
  out << "\n\n";
  out << std::right << std::setw(11) << "$/1M tok" << std::setw(20) << "95% interval" << std::setw(4) << " " << std::setw(7)
      << "GPUs" << std::setw(9) << "SLO" << std::setw(6) << "meets" << std::setw(11) << "req/s" << std::setw(11)
      << "goodput" << std::setw(11) << "TTFT p90" << std::setw(11) << "TPOT p90" << "  configuration\n";
  for (size_t i = 0; i < r.configurations.size(); ++i) {
    const auto& c = r.configurations[i];
    if (c.probes.empty()) {
      out << std::setw(11) << "-" << std::setw(20) << "-" << std::setw(4) << " " << std::setw(7) << "-" << std::setw(9)
          << "-" << std::setw(6) << "-" << std::setw(11) << "-" << std::setw(11) << "-" << std::setw(11) << "-"
          << std::setw(11) << "-" << "  " << c.label << "  [infeasible: " << c.infeasible << "]\n";
      continue;
    }
    const Probe& p = c.probes.front();
    out << std::setw(11) << fixed(p.usd_per_mtok_output, 3) << std::setw(20) << range_text(p.usd_lo, p.usd_hi, 3)
        << std::setw(4) << (r.tied_with_above[i] ? " ~" : " ") << std::setw(7) << fixed(p.gpus, 0) << std::setw(9)
        << percent(p.slo_attainment) << std::setw(6) << (p.pass ? "yes" : "no") << std::setw(11)
        << fixed(p.offered_req_s, 2) << std::setw(11) << fixed(p.goodput_req_s, 2) << std::setw(11)
        << fixed(p.ttft_ms_p90, 1) << std::setw(11) << fixed(p.tpot_ms_p90, 2) << "  " << c.label
        << (p.pass || p.why() != "not stationary" ? "" : "  [queue grows]") << (r.best && *r.best == i ? "  <= cheapest" : "")
        << "\n";
  }
  out << "\n(intervals: " << r.interval_method << "; ~: cannot be told apart from the row above)\n";
  if (r.best) {
    const auto& c = r.configurations[*r.best];
    out << "cheapest: " << c.label << " at $" << fixed(c.probes.front().usd_per_mtok_output, 3)
        << " per 1M output tokens (SLO attainment " << percent(c.probes.front().slo_attainment) << ")\n";
    std::string ties;
    for (size_t i = *r.best + 1; i < r.configurations.size() && r.tied_with_above[i]; ++i)
      if (!r.configurations[i].probes.empty() && r.configurations[i].probes.front().pass)
        ties += (ties.empty() ? "" : ", ") + r.configurations[i].label;
    if (!ties.empty()) out << "not distinguishable from it at this precision: " << ties << "\n";
  } else {
    out << "no configuration meets the SLO target at this load\n";
  }
}

int cmd_capacity(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description opts("servesim capacity options");
  std::string experiment_path, db, headroom;
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
      ("headroom", po::value<std::string>(&headroom),
       "N+1 sizing: replica or node (the SLO must also hold with one replica or node down; overrides [capacity] "
       "headroom), none")
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
  if (vm.count("headroom")) {
    if (headroom != "replica" && headroom != "node" && headroom != "none")
      throw UsageError("--headroom takes replica, node or none, not '" + headroom + "'");
    experiment.set_headroom(headroom == "none" ? "" : headroom, core::SourceLocation{"--headroom", 0, 0});
  }
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
      j["replications"] = r.replications;
      j["interval"] = r.interval_method;
      j["tied_with_above"] = r.tied_with_above;
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
    j["require_stationary"] = r.require_stationary;
    j["cliff_slope"] = r.cliff_slope;
    j["replications"] = r.replications;
    if (!r.headroom.empty()) {
      nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
      auto number = [](double v) { return std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v); };
      for (const HeadroomPair& p : r.pairs) {
        const auto& up = r.configurations[p.all_up].knee;
        const auto& dn = r.configurations[p.one_down].knee;
        pairs.push_back({{"configuration", p.label},
                         {"all_up", up ? nlohmann::ordered_json(up->value) : nlohmann::ordered_json()},
                         {"one_down", dn ? nlohmann::ordered_json(dn->value) : nlohmann::ordered_json()},
                         {"kept", number(p.kept)},
                         {"usd_per_mtok_all_up", up ? nlohmann::ordered_json(up->usd_per_mtok_output) : nlohmann::ordered_json()},
                         {"usd_per_mtok_one_down", dn ? nlohmann::ordered_json(dn->usd_per_mtok_output) : nlohmann::ordered_json()},
                         {"headroom_cost", number(p.cost)}});
      }
      j["headroom"] = r.headroom;
      j["headroom_pairs"] = pairs;
    }
    out << with_configurations(j, r.configurations, r.runs, r.reused).dump() << "\n";
  } else {
    print_capacity(out, r);
    print_headroom(out, r);
  }
  return 0;
}

const bool kRegistered = register_command(
    {"capacity", "EXPERIMENT.toml [--db FILE] [--jobs N] [--target F] [--tolerance F] [--cheapest-at X] [--headroom replica|node] [--json]",
     "per configuration of an experiment, the highest arrival rate (workload.rate or rate_scale) whose SLO\n"
     "attainment stays >= the target (bracketing + bisection); or, with --cheapest-at, the configuration\n"
     "with the lowest $/1M output tokens that meets the SLO at that load",
     cmd_capacity});

}  // namespace
}  // namespace servesim::experiments
