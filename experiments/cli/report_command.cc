// servesim report: plots and an index.html from a results database.
#include <boost/program_options.hpp>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "experiments/cli/command.h"
#include "experiments/report.h"
#include "sim/core/format.h"
#include "sim/core/output_file.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

int cmd_report(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  po::options_description opts("servesim report options");
  std::string db, dir;
  double rate = 0, target = 0.9;
  opts.add_options()
      ("help,h", "this help")
      ("db", po::value<std::string>(&db), "the results database")
      ("out,o", po::value<std::string>(&dir), "directory for the plots and index.html (created if missing)")
      ("rate", po::value<double>(&rate),
       "offered arrival rate (req/s) the CDFs and timelines are taken at (default: the median of the runs')")
      ("target", po::value<double>(&target)->default_value(0.9), "SLO attainment target drawn on its plot")
      ("no-plots", "write the data files, plots.gp and index.html without running gnuplot");
  const po::variables_map vm = parse_options(args, opts, "db");
  if (vm.count("help")) {
    out << "usage: servesim report RESULTS.db --out DIR [options]\n\n" << opts << "\n";
    return 0;
  }
  if (db.empty() || dir.empty()) throw UsageError("report needs a database and a directory: servesim report RESULTS.db --out DIR");
  require_option("--target", target, 0, 1, "the SLO attainment drawn on its plot, a fraction", true);
  if (vm.count("rate"))
    require_option("--rate", rate, 0, 1e12, "the offered arrival rate the CDFs and timelines are taken at, req/s", true);
  core::PathPlan plan;
  plan.input(db, "the results database");
  plan.output_files(dir, {"index.html", "plots.gp", "data"}, "--out");
  plan.check();
  ReportOptions options;
  options.db_path = db;
  options.out_dir = dir;
  if (vm.count("rate")) options.reference_rate = rate;
  options.target = target;
  options.run_gnuplot = !vm.count("no-plots");
  const ReportData data = load_report(options);
  const auto images = write_report(data, options);
  out << "report of " << data.runs.size() << " runs in " << data.series.size() << " configuration"
      << (data.series.size() == 1 ? "" : "s") << ": " << (std::filesystem::path(dir) / "index.html").string();
  if (options.run_gnuplot) out << " and " << images.size() << " plots (PNG + SVG)";
  out << "\n";
  return 0;
}

const bool kRegistered = register_command(
    {"report", "RESULTS.db --out DIR [--rate R] [--target F] [--no-plots]",
     "plots (PNG + SVG, with gnuplot) of goodput and SLO attainment vs arrival rate per configuration,\n"
     "TTFT/TPOT CDFs and per-replica queue and KV-use timelines, and an index.html showing them",
     cmd_report});

}  // namespace
}  // namespace servesim::experiments
