#include "experiments/slurm.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "experiments/process.h"
#include "sim/core/error.h"
#include "sim/core/output_file.h"

namespace servesim::experiments {
namespace {

namespace fs = std::filesystem;

std::string sh(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool matches(const std::string& s, const std::string& allowed) {
  return !s.empty() && s.find_first_not_of(allowed) == std::string::npos;
}

// How the scripts start: an existing file is replaced only when it starts so (a script servesim wrote).
constexpr const char* kSbatchPrefix = "#!/bin/bash\n#SBATCH --job-name=servesim-";
constexpr const char* kSubmitPrefix = "#!/bin/bash\n# Written by servesim slurm";
constexpr const char* kScriptWhat = "a script servesim slurm writes";

// Whole or not at all.
void write_script(const fs::path& path, const std::string& text, const char* prefix) {
  core::write_file_atomically(path.string(), kScriptWhat, core::starts_with(prefix), text);
  ::chmod(path.c_str(), 0755);
}

std::string job_id(const std::string& parsable) {
  std::string id = parsable.substr(0, parsable.find(';'));
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r' || id.back() == ' ')) id.pop_back();
  return id;
}

}  // namespace

SlurmJob write_slurm(Experiment& experiment, const SlurmOptions& options) {
  if (options.tasks < 1) throw core::Error("--tasks must be at least 1");
  if (options.cpus_per_task < 1) throw core::Error("--cpus-per-task must be at least 1");
  if (!options.partition.empty() && !matches(options.partition, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.,-"))
    throw core::Error("--partition '" + options.partition + "': expected a partition name (letters, digits, _ . , -)");
  if (!options.time_limit.empty() && !matches(options.time_limit, "0123456789:-") &&
      options.time_limit != "UNLIMITED" && options.time_limit != "INFINITE")
    throw core::Error("--time '" + options.time_limit +
                      "': expected a Slurm time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS");
  for (const auto& line : options.sbatch_lines)
    if (line.rfind("--", 0) != 0 || line.find('\n') != std::string::npos)
      throw core::Error("--sbatch '" + line + "': expected one sbatch option such as --account=abc");
  experiment.check(0);

  SlurmJob job;
  const fs::path dir = fs::absolute(options.dir.empty() ? fs::path(options.experiment_path).stem().string() + "-slurm"
                                                        : options.dir)
                           .lexically_normal();
  std::error_code ec;
  fs::create_directories(dir / "shards", ec);
  if (!ec) fs::create_directories(dir / "logs", ec);
  if (ec) throw core::Error(dir.string() + ": cannot create the job directory: " + ec.message());
  job.dir = dir.string();
  job.db = options.db.empty() ? (dir / "results.db").string() : fs::absolute(options.db).lexically_normal().string();
  const int64_t points = static_cast<int64_t>(experiment.points().size());
  job.tasks = std::min(options.tasks, std::max<int64_t>(1, points));
  const std::string servesim = options.servesim.empty() ? self_executable() : options.servesim;
  if (servesim.empty()) throw core::Error("cannot tell where the servesim binary is; pass --servesim PATH");
  const std::string exe = fs::absolute(servesim).lexically_normal().string();
  const std::string exp = fs::absolute(options.experiment_path).lexically_normal().string();
  const std::string name = experiment.name();
  std::string job_name;
  for (char c : "servesim-" + name) job_name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';

  // Every script checked before any is written: none replaces a file of another kind.
  for (const auto& [name, prefix] : {std::pair{"sweep.sbatch", kSbatchPrefix}, std::pair{"merge.sbatch", kSbatchPrefix},
                                     std::pair{"submit.sh", kSubmitPrefix}})
    core::check_replaceable((dir / name).string(), kScriptWhat, core::starts_with(prefix));

  std::ostringstream common;
  if (!options.partition.empty()) common << "#SBATCH --partition=" << options.partition << "\n";
  if (!options.time_limit.empty()) common << "#SBATCH --time=" << options.time_limit << "\n";
  for (const auto& line : options.sbatch_lines) common << "#SBATCH " << line << "\n";

  std::ostringstream sweep;
  sweep << "#!/bin/bash\n"
        << "#SBATCH --job-name=" << job_name << "\n"
        << "#SBATCH --array=0-" << job.tasks - 1 << "\n"
        << "#SBATCH --ntasks=1\n"
        << "#SBATCH --cpus-per-task=" << options.cpus_per_task << "\n"
        << "#SBATCH --output=" << (dir / "logs" / "sweep-%A_%a.out").string() << "\n"
        << common.str()
        << "# Written by servesim slurm: experiment '" << name << "' (identity " << experiment.identity() << "), "
        << points << " points in " << job.tasks << " shards. Each array task runs one shard into its own\n"
        << "# database; re-submitting resumes (points already in a shard database are skipped).\n"
        << "set -euo pipefail\n"
        << "task=${SLURM_ARRAY_TASK_ID:?run this script with sbatch}\n"
        << "exec " << sh(exe) << " sweep " << sh(exp) << " --db " << sh((dir / "shards").string()) + "/shard-${task}.db"
        << " --shard \"${task}/" << job.tasks << "\" --jobs \"${SLURM_CPUS_PER_TASK:-" << options.cpus_per_task
        << "}\" --progress-interval 60\n";
  job.sweep_script = (dir / "sweep.sbatch").string();
  write_script(job.sweep_script, sweep.str(), kSbatchPrefix);

  std::ostringstream merge;
  merge << "#!/bin/bash\n"
        << "#SBATCH --job-name=" << job_name << "-merge\n"
        << "#SBATCH --ntasks=1\n"
        << "#SBATCH --cpus-per-task=1\n"
        << "#SBATCH --output=" << (dir / "logs" / "merge-%j.out").string() << "\n"
        << common.str()
        << "# Merges the shard databases of sweep.sbatch into one; fails when a point is missing (a shard\n"
        << "# failed: re-submit, the shards resume, then merge again). Merging is idempotent.\n"
        << "set -euo pipefail\n"
        << "shards=()\n"
        << "for i in $(seq 0 " << job.tasks - 1 << "); do\n"
        << "  f=" << sh((dir / "shards").string()) << "/shard-$i.db\n"
        << "  if [ -e \"$f\" ]; then shards+=(\"$f\"); else echo \"shard $i wrote no database ($f)\" >&2; fi\n"
        << "done\n"
        << "if [ ${#shards[@]} -eq 0 ]; then echo 'no shard database to merge' >&2; exit 1; fi\n"
        << "exec " << sh(exe) << " merge " << sh(job.db) << " \"${shards[@]}\" --require-complete\n";
  job.merge_script = (dir / "merge.sbatch").string();
  write_script(job.merge_script, merge.str(), kSbatchPrefix);

  std::ostringstream submit;
  submit << "#!/bin/bash\n"
         << "# Written by servesim slurm: submits the sweep's job array and the merge job that waits for it.\n"
         << "set -euo pipefail\n"
         << "array=$(sbatch --parsable " << sh(job.sweep_script) << ")\n"
         << "array=${array%%;*}\n"
         << "merge=$(sbatch --parsable --dependency=afterany:\"$array\" " << sh(job.merge_script) << ")\n"
         << "echo \"array job $array (" << job.tasks << " tasks), merge job ${merge%%;*}: results in "
         << job.db << "\"\n";
  job.submit_script = (dir / "submit.sh").string();
  write_script(job.submit_script, submit.str(), kSubmitPrefix);
  return job;
}

void submit_slurm(SlurmJob& job, bool wait) {
  if (find_program("sbatch").empty())
    throw core::Error("sbatch is not in PATH: submit from a Slurm login node, or run " + job.submit_script + " there");
  ProcessResult array = run_process({"sbatch", "--parsable", job.sweep_script});
  if (array.exit_code != 0)
    throw core::Error("sbatch " + job.sweep_script + " failed (exit " + std::to_string(array.exit_code) + "): " + array.err);
  job.array_job_id = job_id(array.out);
  if (job.array_job_id.empty()) throw core::Error("sbatch printed no job id for " + job.sweep_script + ": " + array.out);
  std::vector<std::string> merge_cmd = {"sbatch", "--parsable", "--dependency=afterany:" + job.array_job_id};
  if (wait) merge_cmd.push_back("--wait");
  merge_cmd.push_back(job.merge_script);
  ProcessResult merge = run_process(merge_cmd);
  job.merge_job_id = job_id(merge.out);
  if (merge.exit_code != 0) {
    if (wait && !job.merge_job_id.empty())
      throw core::Error("the merge job " + job.merge_job_id + " failed (exit " + std::to_string(merge.exit_code) +
                        "); see " + job.dir + "/logs/: " + merge.err);
    throw core::Error("sbatch " + job.merge_script + " failed (exit " + std::to_string(merge.exit_code) + "): " +
                      merge.err + " (the array job " + job.array_job_id + " was submitted)");
  }
}

}  // namespace servesim::experiments
