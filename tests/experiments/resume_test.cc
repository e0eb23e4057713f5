// Killing `servesim sweep` with SIGKILL at any moment leaves a valid database, and re-running
// finishes it with the results an uninterrupted sweep writes. Runs the real binary (SERVESIM_BIN).
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/experiments/results_dump.h"
#include "tests/reliability/process.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::dump_results;
using servesim::testing::TempDir;

const char* kExperiment = R"(
name = "kill"
seeds = [1, 2, 3]
[base]
[base.workload]
kind = "poisson"
rate = 30.0
max_requests = 400
[base.workload.prompt]
kind = "uniform"
min = 50
max = 1500
[base.workload.output]
kind = "uniform"
min = 1
max = 300
[base.model]
kind = "llama-3-8b"
[base.gpu]
kind = "h100-sxm"
[base.cluster]
replicas = 2
[base.slo]
ttft_ms = 500
[[axis]]
key = "router.kind"
values = ["round_robin", "least_outstanding"]
[[axis]]
key = "workload.rate"
values = [20.0, 40.0, 60.0, 80.0]
)";
constexpr int kPoints = 2 * 4 * 3;

pid_t start_sweep(const std::string& experiment, const std::string& db) {
  const std::string bin = servesim::testing::servesim_bin();
  std::vector<std::string> args = {bin, "sweep", experiment, "--db", db, "--jobs", "2", "--quiet"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, bin.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(rc, 0) << "cannot start " << bin;
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Runs the sweep and SIGKILLs it after `delay`; returns whether it was still running.
bool run_and_kill(const std::string& experiment, const std::string& db, std::chrono::microseconds delay) {
  const pid_t pid = start_sweep(experiment, db);
  std::this_thread::sleep_for(delay);
  const bool killed = kill(pid, SIGKILL) == 0;
  const int status = wait_for(pid);
  return killed && WIFSIGNALED(status);
}

// The database after a kill: intact, and holding whole points only. Returns the points it holds.
int check_valid(const std::string& db_path) {
  if (!std::filesystem::exists(db_path)) return 0;
  SQLite::Database db(db_path, SQLite::OPEN_READWRITE);  // rolls back a killed writer's journal
  EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
  if (!db.tableExists("points")) {
    if (db.tableExists("runs")) {
      EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM runs").getInt(), 0);
    }
    return 0;
  }
  const int points = db.execAndGet("SELECT COUNT(*) FROM points").getInt();
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM runs").getInt(), points);
  // Every run complete: its summary written and all its request rows there.
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM runs r WHERE r.requests_total IS NULL OR r.requests_total <> "
                          "(SELECT COUNT(*) FROM requests q WHERE q.run_id = r.run_id)")
                .getInt(),
            0);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM points p LEFT JOIN runs r USING (run_id) WHERE r.run_id IS NULL").getInt(), 0);
  return points;
}

// Runs the sweep until it dies at crash point `crash_at` (sim/core/crash_point.h); returns whether
// it did die there.
bool run_and_crash(const std::string& experiment, const std::string& db, const std::string& crash_at) {
  const servesim::testing::ProcessResult r = servesim::testing::run_process(
      {servesim::testing::servesim_bin(), "sweep", experiment, "--db", db, "--jobs", "2", "--quiet"}, "", 600, -1,
      {"SERVESIM_CRASH_AT=" + crash_at});
  return r.signal == SIGKILL;
}

TEST(ResumeTest, KilledAtAnyMomentTheSweepResumesToTheSameResults) {
  ASSERT_FALSE(servesim::testing::servesim_bin().empty()) << "SERVESIM_BIN is not set (run through meson test)";
  TempDir dir;
  const std::string experiment = dir.file("kill.toml");
  std::ofstream(experiment) << kExperiment;

  const auto t0 = std::chrono::steady_clock::now();
  const pid_t ref = start_sweep(experiment, dir.file("ref.db"));
  const int status = wait_for(ref);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto full = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  ASSERT_EQ(check_valid(dir.file("ref.db")), kPoints);
  const std::string reference = dump_results(dir.file("ref.db"));

  // Deterministic deaths: after the k-th point's commit, then again after j more while resuming,
  // and inside the next point's transaction. Points are committed in point order for any --jobs,
  // so the database holds exactly k, then k + j points.
  int cases = 0;
  for (const auto& [k, j] : std::vector<std::pair<int, int>>{{1, 1}, {5, 3}, {12, 7}, {21, 2}}) {
    SCOPED_TRACE("killed after " + std::to_string(k) + " points, then " + std::to_string(j) + " more");
    const std::string db = dir.file("crash-" + std::to_string(cases++) + ".db");
    ASSERT_TRUE(run_and_crash(experiment, db, "sweep.point_committed:" + std::to_string(k)));
    EXPECT_EQ(check_valid(db), k);
    ASSERT_TRUE(run_and_crash(experiment, db, "sweep.point_committed:" + std::to_string(j)));
    EXPECT_EQ(check_valid(db), k + j);
    ASSERT_TRUE(run_and_crash(experiment, db, "sqlite.before_commit:1"));
    EXPECT_EQ(check_valid(db), k + j);
    const int rc = wait_for(start_sweep(experiment, db));
    ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    EXPECT_EQ(check_valid(db), kPoints);
    EXPECT_EQ(dump_results(db), reference);
  }

  // Real SIGKILLs at wall-clock moments: where they land depends on the machine's speed, so only
  // what holds wherever they land is asserted (valid, never fewer points, the same results).
  for (double fraction : {0.01, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85}) {
    const std::string db = dir.file("kill-" + std::to_string(cases++) + ".db");
    const auto delay = std::chrono::microseconds(static_cast<int64_t>(static_cast<double>(full.count()) * fraction));
    run_and_kill(experiment, db, delay);
    const int first = check_valid(db);
    EXPECT_LE(first, kPoints);
    // Killed again while resuming.
    run_and_kill(experiment, db, delay / 2);
    const int second = check_valid(db);
    EXPECT_GE(second, first);
    // Then finished.
    const int rc = wait_for(start_sweep(experiment, db));
    ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << "the resumed sweep failed after a kill at " << fraction;
    EXPECT_EQ(check_valid(db), kPoints);
    EXPECT_EQ(dump_results(db), reference) << "killed at " << fraction << " of the run (" << first << ", then "
                                           << second << " points committed)";
  }
}

}  // namespace
}  // namespace servesim::experiments
