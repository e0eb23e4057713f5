#pragma once
// servesim slurm: a sweep as a Slurm job array. Writes, into one directory:
//   sweep.sbatch   the array job: task I of N runs `servesim sweep --shard I/N` into shards/shard-I.db
//   merge.sbatch   the merge job: `servesim merge results.db shards/*.db --require-complete`
//   submit.sh      submits the array, then the merge with --dependency=afterany:<array>
// and with --submit submits them itself (sbatch). Paths in the scripts are absolute, so the jobs
// run from any directory of a shared file system. Shard databases are resumable: re-submitting
// after a failure runs only the missing points.

#include <cstdint>
#include <string>
#include <vector>

#include "experiments/experiment.h"

namespace servesim::experiments {

struct SlurmOptions {
  std::string experiment_path;   // as the user gave it
  int64_t tasks = 1;             // array tasks (shards)
  std::string partition;         // "" = the cluster's default
  std::string time_limit;        // "" = the partition's default; Slurm formats: MM, MM:SS, HH:MM:SS, D-HH:MM:SS
  int64_t cpus_per_task = 1;     // each task runs its shard with --jobs = this
  std::string dir;               // where the scripts, shards and logs go
  std::string db;                // the merged database ("" = DIR/results.db)
  std::string servesim;          // the servesim binary the jobs run ("" = this one)
  std::vector<std::string> sbatch_lines;  // extra "#SBATCH ..." options, e.g. "--account=abc"
};

struct SlurmJob {
  std::string dir, sweep_script, merge_script, submit_script, db;
  int64_t tasks = 0;             // after capping at the number of points
  std::string array_job_id, merge_job_id;  // set by submit_slurm
};

// Checks every point of the experiment, then writes the scripts. Throws core::Error for bad options.
SlurmJob write_slurm(Experiment& experiment, const SlurmOptions& options);

// Submits the array and the dependent merge job with sbatch; with `wait`, blocks until the merge
// job has finished (sbatch --wait) and throws core::Error if it failed.
void submit_slurm(SlurmJob& job, bool wait);

}  // namespace servesim::experiments
