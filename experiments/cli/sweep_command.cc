// servesim sweep: every point of an experiment file into one results database.
#include <boost/program_options.hpp>
#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "experiments/cli/command.h"
#include "experiments/experiment.h"
#include "experiments/sweep.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

constexpr size_t kMaxTableRows = 200;

bool is_terminal(const std::ostream& err) { return &err == &std::cerr && ::isatty(STDERR_FILENO) == 1; }

void print_points(std::ostream& out, const Experiment& e) {
  out << "experiment '" << e.name() << "' (" << e.source_name() << "): " << e.points().size() << " points, identity "
      << e.identity() << "\n";
  out << std::left << std::setw(7) << "point" << std::setw(18) << "key" << "settings\n";
  for (const Point& p : e.points())
    out << std::left << std::setw(7) << p.index << std::setw(18) << p.key << p.label()
        << (p.skipped ? "  [skipped: " + p.skip_reason + "]" : "") << "\n";
}

int cmd_sweep(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description opts("servesim sweep options");
  std::string experiment_path, db, shard = "0/1";
  int jobs = 0;
  double interval = 10;
  opts.add_options()
      ("help,h", "this help")
      ("experiment", po::value<std::string>(&experiment_path), "the experiment file (TOML)")
      ("db", po::value<std::string>(&db), "results database (created if missing; required)")
      ("jobs,j", po::value<int>(&jobs)->default_value(0), "points run in parallel (0 = all cores)")
      ("shard", po::value<std::string>(&shard)->default_value("0/1"),
       "run only shard I of N (points with index % N == I; shards are numbered from 0)")
      ("list", "check every point and print them (index, key, settings) without running")
      ("progress-interval", po::value<double>(&interval)->default_value(10),
       "seconds between progress lines when stderr is not a terminal")
      ("check", "run every point under the invariant checker, as servesim run --check does (a violation is an "
                "error, exit 1)")
      ("quiet,q", "no progress output");
  const po::variables_map vm = parse_options(args, opts, "experiment");
  if (vm.count("help")) {
    out << "usage: servesim sweep EXPERIMENT.toml --db FILE [options]\n\n" << opts << "\n";
    return 0;
  }
  if (experiment_path.empty()) throw UsageError("sweep needs an experiment file: servesim sweep EXPERIMENT.toml --db FILE");
  const auto [shard_index, shard_count] = parse_shard(shard);
  resolve_jobs(jobs);
  require_option("--progress-interval", interval, 0, 1e6, "seconds between progress lines", true);

  Experiment experiment = Experiment::load(experiment_path);
  experiment.check(jobs);
  if (vm.count("list")) {
    print_points(out, experiment);
    return 0;
  }
  if (db.empty()) throw UsageError("sweep needs a results database: --db FILE");
  check_experiment_outputs(experiment, experiment_path, db);

  SweepOptions options;
  options.db_path = db;
  options.jobs = jobs;
  options.shard_index = shard_index;
  options.shard_count = shard_count;
  options.progress = vm.count("quiet") ? nullptr : &err;
  options.progress_tty = is_terminal(err);
  options.progress_period_s = interval;
  options.check = vm.count("check") > 0;
  if (options.progress && !options.progress_tty)
    err << "sweep '" << experiment.name() << "': " << experiment.points().size() << " points" << std::flush;
  if (options.progress && !options.progress_tty)
    err << (shard_count > 1 ? ", shard " + shard : "") << ", " << resolve_jobs(jobs) << " jobs, into " << db << "\n";
  const SweepStats s = run_sweep(experiment, options);

  out << "sweep '" << experiment.name() << "': " << s.points << " points";
  if (shard_count > 1) out << ", shard " << shard << " has " << s.in_shard;
  out << "; " << s.already_done << " already in " << db << ", ran " << s.ran << " in " << fixed(s.wall_seconds, 1)
      << " s";
  if (s.skipped) out << "; " << s.skipped << " skipped as infeasible";
  out << "\n";
  if (s.results.size() <= kMaxTableRows) {
    out << "\n" << std::right << std::setw(6) << "point" << std::setw(10) << "req/s" << std::setw(11) << "goodput"
        << std::setw(9) << "SLO" << std::setw(11) << "TTFT p90" << std::setw(11) << "TPOT p90" << std::setw(11)
        << "$/1M tok" << "  settings\n";
    for (const auto& [index, f] : s.results)
      out << std::setw(6) << index << std::setw(10) << fixed(f.offered_req_s, 2) << std::setw(11)
          << fixed(f.goodput_req_s, 2) << std::setw(9) << percent(f.slo_attainment) << std::setw(11)
          << fixed(f.ttft_ms_p90, 1) << std::setw(11) << fixed(f.tpot_ms_p90, 2) << std::setw(11)
          << fixed(f.cost_usd_per_mtok_output, 3) << "  " << experiment.points()[static_cast<size_t>(index)].label()
          << "\n";
  } else {
    out << "(" << s.results.size() << " points: query " << db << " or run servesim report " << db << " --out DIR)\n";
  }
  return 0;
}

const bool kRegistered = register_command(
    {"sweep", "EXPERIMENT.toml --db FILE [--jobs N] [--shard I/N] [--list] [--quiet]",
     "run every point of an experiment (a base configuration and axes) in parallel into one database;\n"
     "re-running skips the points already there",
     cmd_sweep});

}  // namespace
}  // namespace servesim::experiments
