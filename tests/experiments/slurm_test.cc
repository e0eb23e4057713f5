// Slurm job scripts: their content, running them as Slurm would (task ids in the environment), and
// submission through a stand-in sbatch. The real-Slurm round trip is scripts/ci-steps/20-slurm.sh.
#include "experiments/slurm.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "experiments/process.h"
#include "experiments/sweep.h"
#include "sim/core/error.h"
#include "tests/experiments/results_dump.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::dump_results;
using servesim::testing::file_bytes;
using servesim::testing::TempDir;

const std::string kExperiment = R"(
name = "slurm test"
seeds = [1, 2]
[base]
[base.workload]
kind = "poisson"
rate = 20.0
max_requests = 150
[base.workload.prompt]
kind = "uniform"
min = 50
max = 800
[base.workload.output]
kind = "uniform"
min = 1
max = 100
[base.model]
kind = "llama-3-8b"
[base.gpu]
kind = "h100-sxm"
[[axis]]
key = "router.kind"
values = ["round_robin", "random", "least_outstanding"]
[[axis]]
key = "workload.rate"
values = [10.0, 40.0]
)";

struct Fixture {
  TempDir dir;
  std::string experiment = dir.file("exp.toml");
  Fixture() { std::ofstream(experiment) << kExperiment; }
  SlurmOptions options(int64_t tasks) const {
    SlurmOptions o;
    o.experiment_path = experiment;
    o.tasks = tasks;
    o.dir = dir.file("job");
    o.servesim = servesim::testing::servesim_bin();
    return o;
  }
};

TEST(SlurmTest, WritesAnArrayScriptAMergeScriptAndASubmitScript) {
  Fixture f;
  SlurmOptions o = f.options(4);
  o.partition = "cpu";
  o.time_limit = "1:00:00";
  o.cpus_per_task = 2;
  o.sbatch_lines = {"--account=abc"};
  Experiment e = Experiment::load(f.experiment);
  const SlurmJob job = write_slurm(e, o);
  EXPECT_EQ(job.tasks, 4);
  EXPECT_EQ(job.db, f.dir.file("job/results.db"));
  const std::string sweep = file_bytes(job.sweep_script);
  for (const std::string& needle : std::vector<std::string>{"#SBATCH --array=0-3\n", "#SBATCH --cpus-per-task=2\n", "#SBATCH --partition=cpu\n", "#SBATCH --time=1:00:00\n",
        "#SBATCH --account=abc\n", "#SBATCH --job-name=servesim-slurm_test\n", "--shard \"${task}/4\"",
        "--jobs \"${SLURM_CPUS_PER_TASK:-2}\"", "'" + f.experiment + "'", "/shard-${task}.db", "12 points in 4 shards"})
    EXPECT_NE(sweep.find(needle), std::string::npos) << needle << "\n" << sweep;
  const std::string merge = file_bytes(job.merge_script);
  EXPECT_NE(merge.find(" merge '" + job.db + "' \"${shards[@]}\" --require-complete"), std::string::npos) << merge;
  EXPECT_NE(merge.find("seq 0 3"), std::string::npos) << merge;
  const std::string submit = file_bytes(job.submit_script);
  EXPECT_NE(submit.find("--dependency=afterany:\"$array\""), std::string::npos) << submit;
  struct stat st{};
  ASSERT_EQ(::stat(job.sweep_script.c_str(), &st), 0);
  EXPECT_TRUE(st.st_mode & S_IXUSR);

  // More tasks than points: one task per point.
  Experiment again = Experiment::load(f.experiment);
  EXPECT_EQ(write_slurm(again, f.options(100)).tasks, 12);
}

TEST(SlurmTest, TheScriptsRunAsSlurmWouldRunThemAndMergeToTheWholeSweep) {
  ASSERT_FALSE(servesim::testing::servesim_bin().empty()) << "SERVESIM_BIN is not set (run through meson test)";
  Fixture f;
  Experiment e = Experiment::load(f.experiment);
  const SlurmJob job = write_slurm(e, f.options(4));
  for (int task = 0; task < 4; ++task) {
    const ProcessResult r = run_process({"env", "SLURM_ARRAY_TASK_ID=" + std::to_string(task), "SLURM_CPUS_PER_TASK=1",
                                         "bash", job.sweep_script});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  const ProcessResult m = run_process({"bash", job.merge_script});
  ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
  EXPECT_NE(m.out.find("holds 12 of 12 points"), std::string::npos) << m.out;

  Experiment whole = Experiment::load(f.experiment);
  SweepOptions o;
  o.db_path = f.dir.file("whole.db");
  o.jobs = 2;
  run_sweep(whole, o);
  EXPECT_EQ(dump_results(job.db), dump_results(o.db_path));

  // A missing shard makes the merge job fail, keeping what there is.
  std::filesystem::remove(job.db);
  std::filesystem::remove(f.dir.file("job/shards/shard-2.db"));
  const ProcessResult partial = run_process({"bash", job.merge_script});
  EXPECT_NE(partial.exit_code, 0);
  EXPECT_NE(partial.err.find("shard 2 wrote no database"), std::string::npos) << partial.err;
  EXPECT_NE(partial.err.find("holds 9 of the experiment's 12 points"), std::string::npos) << partial.err;
}

TEST(SlurmTest, SubmitsTheArrayThenTheMergeThatDependsOnIt) {
  Fixture f;
  Experiment e = Experiment::load(f.experiment);
  SlurmJob job = write_slurm(e, f.options(3));
  // A stand-in sbatch: logs its arguments, prints job ids like `sbatch --parsable`.
  const std::string bin = f.dir.file("bin");
  std::filesystem::create_directories(bin);
  const std::string log = f.dir.file("sbatch.log");
  std::ofstream(bin + "/sbatch") << "#!/bin/bash\necho \"$*\" >> '" << log << "'\n"
                                 << "n=$(wc -l < '" << log << "')\necho \"$((4000 + n));cluster\"\n"
                                 << "[ -z \"$FAIL_SBATCH\" ] || { echo 'sbatch: error: invalid partition' >&2; exit 1; }\n";
  ::chmod((bin + "/sbatch").c_str(), 0755);
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (bin + ":" + old_path).c_str(), 1);
  submit_slurm(job, true);
  EXPECT_EQ(job.array_job_id, "4001");
  EXPECT_EQ(job.merge_job_id, "4002");
  const std::string calls = file_bytes(log);
  EXPECT_NE(calls.find("--parsable " + job.sweep_script + "\n"), std::string::npos) << calls;
  EXPECT_NE(calls.find("--parsable --dependency=afterany:4001 --wait " + job.merge_script + "\n"), std::string::npos)
      << calls;
  ::setenv("FAIL_SBATCH", "1", 1);
  std::string err;
  try {
    submit_slurm(job, false);
  } catch (const core::Error& e) {
    err = e.what();
  }
  ::unsetenv("FAIL_SBATCH");
  ::setenv("PATH", old_path.c_str(), 1);
  EXPECT_NE(err.find("invalid partition"), std::string::npos) << err;
}

TEST(SlurmTest, BadOptionsAreRefused) {
  Fixture f;
  auto error_of = [&](SlurmOptions o) {
    try {
      Experiment e = Experiment::load(f.experiment);
      write_slurm(e, o);
    } catch (const core::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  SlurmOptions o = f.options(4);
  o.time_limit = "1h";
  EXPECT_NE(error_of(o).find("--time '1h'"), std::string::npos);
  o = f.options(0);
  EXPECT_NE(error_of(o).find("--tasks"), std::string::npos);
  o = f.options(2);
  o.partition = "a b";
  EXPECT_NE(error_of(o).find("--partition"), std::string::npos);
  o = f.options(2);
  o.sbatch_lines = {"account=abc"};
  EXPECT_NE(error_of(o).find("--sbatch"), std::string::npos);
}

}  // namespace
}  // namespace servesim::experiments
