// servesim slurm: a sweep as a Slurm job array plus a merge job.
#include <boost/program_options.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "experiments/cli/command.h"
#include "experiments/experiment.h"
#include "experiments/slurm.h"

namespace servesim::experiments {
namespace po = boost::program_options;
namespace {

int cmd_slurm(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  po::options_description opts("servesim slurm options");
  SlurmOptions o;
  opts.add_options()
      ("help,h", "this help")
      ("experiment", po::value<std::string>(&o.experiment_path), "the experiment file (TOML)")
      ("tasks,n", po::value<int64_t>(&o.tasks), "array tasks, one shard each (required; capped at the number of points)")
      ("partition,p", po::value<std::string>(&o.partition), "Slurm partition (default: the cluster's default)")
      ("time,t", po::value<std::string>(&o.time_limit), "time limit per task, e.g. 30, 2:00:00 or 1-00:00:00")
      ("cpus-per-task,c", po::value<int64_t>(&o.cpus_per_task)->default_value(1), "CPUs per task (its sweep's --jobs)")
      ("dir", po::value<std::string>(&o.dir), "directory for the scripts, shard databases and logs "
                                              "(default: EXPERIMENT-slurm)")
      ("db", po::value<std::string>(&o.db), "the merged database (default: DIR/results.db)")
      ("servesim", po::value<std::string>(&o.servesim), "the servesim binary the jobs run (default: this one)")
      ("sbatch", po::value<std::vector<std::string>>(&o.sbatch_lines)->composing(),
       "an extra sbatch option for both jobs, e.g. --sbatch=--account=abc (repeatable)")
      ("submit", "submit the array and the merge job with sbatch")
      ("wait", "with --submit: wait until the merge job has finished (sbatch --wait)");
  const po::variables_map vm = parse_options(args, opts, "experiment");
  if (vm.count("help")) {
    out << "usage: servesim slurm EXPERIMENT.toml --tasks N [options]\n\n" << opts << "\n";
    return 0;
  }
  if (o.experiment_path.empty()) throw UsageError("slurm needs an experiment file: servesim slurm EXPERIMENT.toml --tasks N");
  if (!vm.count("tasks")) throw UsageError("slurm needs --tasks N (the number of array tasks)");
  if (vm.count("wait") && !vm.count("submit")) throw UsageError("--wait goes with --submit");
  require_option("--tasks", static_cast<double>(o.tasks), 1, 1e6, "array tasks");
  require_option("--cpus-per-task", static_cast<double>(o.cpus_per_task), 1, kMaxJobs, "CPUs per task");
  Experiment experiment = Experiment::load(o.experiment_path);
  SlurmJob job = write_slurm(experiment, o);
  out << "experiment '" << experiment.name() << "': " << experiment.points().size() << " points in " << job.tasks
      << " array tasks\n"
      << "  " << job.sweep_script << "\n  " << job.merge_script << "\n  " << job.submit_script << "\n";
  if (!vm.count("submit")) {
    out << "submit with: " << job.submit_script << "   (results: " << job.db << ")\n";
    return 0;
  }
  submit_slurm(job, vm.count("wait") > 0);
  out << "submitted array job " << job.array_job_id << " and merge job " << job.merge_job_id
      << (vm.count("wait") ? " (finished)" : "") << "; results: " << job.db << "\n";
  return 0;
}

const bool kRegistered = register_command(
    {"slurm", "EXPERIMENT.toml --tasks N [--partition P] [--time T] [--cpus-per-task C] [--dir DIR] [--submit [--wait]]",
     "write an sbatch job array that runs a sweep's shards (and a dependent job that merges them);\n"
     "with --submit, submit it",
     cmd_slurm});

}  // namespace
}  // namespace servesim::experiments
