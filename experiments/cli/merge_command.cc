// servesim merge: shard databases of one experiment into one.
#include <boost/program_options.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "experiments/cli/command.h"
#include "experiments/results_db.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

int cmd_merge(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  po::options_description opts("servesim merge options");
  std::vector<std::string> files;
  opts.add_options()
      ("help,h", "this help")
      ("files", po::value<std::vector<std::string>>(&files), "OUT.db IN.db...")
      ("require-complete", "fail (exit 1) unless OUT then holds every point of the experiment");
  const po::variables_map vm = parse_options(args, opts, "files", -1);
  if (vm.count("help")) {
    out << "usage: servesim merge OUT.db IN.db... [--require-complete]\n\n" << opts << "\n";
    return 0;
  }
  if (files.size() < 2) throw UsageError("merge needs an output and at least one input: servesim merge OUT.db IN.db...");
  const std::string target = files.front();
  const std::vector<std::string> inputs(files.begin() + 1, files.end());
  const MergeStats s = merge_databases(target, inputs);
  out << "merged " << s.inputs << " database" << (s.inputs == 1 ? "" : "s") << " into " << target << ": "
      << s.points_added << " points added, " << s.points_already << " already there; " << target << " holds "
      << s.points_total;
  if (s.points_expected > 0) out << " of " << s.points_expected;
  out << " points\n";
  if (vm.count("require-complete") && s.points_expected > 0 && s.points_total < s.points_expected)
    throw core::Error(target + ": holds " + std::to_string(s.points_total) + " of the experiment's " +
                      std::to_string(s.points_expected) +
                      " points (a shard failed or is missing; re-run it, then merge again)");
  return 0;
}

const bool kRegistered = register_command(
    {"merge", "OUT.db IN.db... [--require-complete]",
     "merge the databases of one experiment's shards into OUT.db (created if missing); idempotent,\n"
     "and refuses databases of another experiment",
     cmd_merge});

}  // namespace
}  // namespace servesim::experiments
