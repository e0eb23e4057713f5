// Crash safety: `servesim run` and `servesim sweep` are killed with SIGKILL at many moments (chosen
// by a seeded core::Rng as fractions of a measured clean run, so the same moments every time on a
// given machine, spread over the whole run and packed near the commit at its end). After each kill
// the results must be intact (PRAGMA integrity_check), hold no partial run (every run listed has all
// its request rows; no row belongs to an unlisted run), and a re-run must complete.
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/rng.h"
#include "tests/experiments/results_dump.h"
#include "tests/reliability/process.h"
#include "tests/test_paths.h"

namespace servesim::testing {
namespace {

namespace fs = std::filesystem;

constexpr double kTimeoutS = 300;
constexpr int kRunKills = 16;
constexpr int kSweepKills = 10;

// The moments to kill at, as fractions of a clean run's wall time: half anywhere, half in its last
// fifth (where the results are committed), a few just after it would have finished.
std::vector<double> kill_fractions(int n, uint64_t seed) {
  core::Rng rng(seed, "crash-safety");
  std::vector<double> f;
  for (int i = 0; i < n; ++i) f.push_back(i % 2 == 0 ? rng.uniform() : 0.8 + 0.3 * rng.uniform());
  return f;
}

// A CSV file as records of fields (RFC 4180: quoted fields may hold commas and line breaks).
std::vector<std::vector<std::string>> read_csv(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\n') {
      row.push_back(field);
      field.clear();
      rows.push_back(row);
      row.clear();
    } else {
      field += c;
    }
  }
  EXPECT_TRUE(row.empty() && field.empty() && !quoted) << p << " ends inside a record";
  return rows;
}

// What a reader may see in a results database after a kill. Opened read-write, as the next
// servesim does, so that SQLite rolls back a hot journal first. Returns the number of runs.
int64_t check_database(const fs::path& db_path) {
  SQLite::Database db(db_path.string(), SQLite::OPEN_READWRITE);
  EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM runs r WHERE requests_total IS NULL OR "
                          "requests_total != (SELECT COUNT(*) FROM requests q WHERE q.run_id = r.run_id)")
                .getInt64(),
            0)
      << "a run without all its request rows";
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM requests WHERE run_id NOT IN (SELECT run_id FROM runs)").getInt64(), 0)
      << "request rows of a run that is not there";
  EXPECT_EQ(
      db.execAndGet("SELECT COUNT(*) FROM replica_timeseries WHERE run_id NOT IN (SELECT run_id FROM runs)").getInt64(),
      0);
  return db.execAndGet("SELECT COUNT(*) FROM runs").getInt64();
}

// The CSV directory: every run runs.csv names has exactly its requests_total rows in requests.csv.
// (Rows of a run runs.csv does not name are a killed run's, invisible by design.) Returns the runs.
int64_t check_csv(const fs::path& dir) {
  if (!fs::exists(dir / "runs.csv")) return 0;
  const auto runs = read_csv(dir / "runs.csv");
  const auto requests = read_csv(dir / "requests.csv");
  EXPECT_FALSE(runs.empty());
  if (runs.empty()) return 0;
  size_t id_col = 0, total_col = runs[0].size();
  for (size_t i = 0; i < runs[0].size(); ++i)
    if (runs[0][i] == "requests_total") total_col = i;
  EXPECT_LT(total_col, runs[0].size());
  std::map<std::string, int64_t> rows_per_run;
  for (size_t i = 1; i < requests.size(); ++i) ++rows_per_run[requests[i].at(0)];
  for (size_t i = 1; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].size(), runs[0].size()) << "a torn record in runs.csv";
    if (runs[i].size() != runs[0].size()) continue;
    EXPECT_EQ(rows_per_run[runs[i][id_col]], std::stoll(runs[i][total_col]))
        << "run " << runs[i][id_col] << " in runs.csv does not have its request rows in requests.csv";
  }
  return static_cast<int64_t>(runs.size()) - 1;
}

ProcessResult servesim(const std::vector<std::string>& args, const fs::path& cwd, double kill_after_s = -1) {
  std::vector<std::string> argv = {servesim_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, cwd.string(), kTimeoutS, kill_after_s);
}

const char* kRunConfig =
    "seed = 5\n[workload]\nkind = \"poisson\"\nrate = 200\nmax_requests = 6000\n"
    "[workload.prompt]\nkind = \"uniform\"\nmin = 10\nmax = 2000\n"
    "[workload.output]\nkind = \"uniform\"\nmin = 1\nmax = 400\n"
    "[model]\nkind = \"llama-3-8b\"\n[gpu]\nkind = \"h100-sxm\"\n[cluster]\nreplicas = 4\n"
    "[output]\nsample_interval_ms = 50\n";

TEST(CrashSafetyTest, KilledRunsLeaveNoPartialRunAndAReRunCompletes) {
  ASSERT_FALSE(servesim_bin().empty());
  TempDir dir;
  const fs::path d = dir.path();
  std::ofstream(d / "run.toml") << kRunConfig;
  const std::vector<std::string> args = {"run", "run.toml", "--db", "results.db", "--csv", "csv"};
  // A clean run first: the results hold one run, and its wall time scales the kill moments.
  const ProcessResult clean = servesim(args, d);
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  int64_t db_runs = check_database(d / "results.db");
  int64_t csv_runs = check_csv(d / "csv");
  ASSERT_EQ(db_runs, 1);
  ASSERT_EQ(csv_runs, 1);
  int killed = 0;
  // Kills at seeded moments; on a loaded machine a run can finish before its kill, so the schedule
  // goes on (at most three times as long) until half of the planned kills have landed mid-run.
  const std::vector<double> fractions = kill_fractions(3 * kRunKills, 1);
  for (size_t i = 0; i < fractions.size() && (i < kRunKills || killed < kRunKills / 2); ++i) {
    const double f = fractions[i];
    SCOPED_TRACE("killed at " + std::to_string(f) + " of " + std::to_string(clean.wall_seconds) + " s");
    const ProcessResult r = servesim(args, d, f * clean.wall_seconds);
    killed += r.signal == SIGKILL;
    EXPECT_TRUE(r.signal == SIGKILL || r.exit_code == 0) << r.err;
    const int64_t now_db = check_database(d / "results.db");
    const int64_t now_csv = check_csv(d / "csv");
    // A run is either all there or not at all.
    EXPECT_TRUE(now_db == db_runs || now_db == db_runs + 1) << now_db << " runs after " << db_runs;
    EXPECT_TRUE(now_csv == csv_runs || now_csv == csv_runs + 1) << now_csv << " runs after " << csv_runs;
    if (r.exit_code == 0) {
      EXPECT_EQ(now_db, db_runs + 1);
      EXPECT_EQ(now_csv, csv_runs + 1);
    }
    db_runs = now_db;
    csv_runs = now_csv;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GE(killed, kRunKills / 2) << "most kills should land while the run is going";
  // A re-run after all that completes and adds exactly one whole run.
  const ProcessResult again = servesim(args, d);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(check_database(d / "results.db"), db_runs + 1);
  EXPECT_EQ(check_csv(d / "csv"), csv_runs + 1);
  EXPECT_FALSE(fs::exists(d / "results.db-journal"));
}

const char* kSweep =
    "name = \"crash\"\nseeds = [1, 2, 3]\n"
    "[base]\n[base.workload]\nkind = \"poisson\"\nrate = 100\nmax_requests = 1500\n"
    "[base.workload.prompt]\nkind = \"uniform\"\nmin = 10\nmax = 2000\n"
    "[base.workload.output]\nkind = \"uniform\"\nmin = 1\nmax = 300\n"
    "[base.model]\nkind = \"llama-3-8b\"\n[base.gpu]\nkind = \"h100-sxm\"\n[base.cluster]\nreplicas = 2\n"
    "[[axis]]\nkey = \"router.kind\"\nvalues = [\"round_robin\", \"least_outstanding\"]\n";

TEST(CrashSafetyTest, KilledSweepsResumeToTheSameResultsAsAnUninterruptedOne) {
  ASSERT_FALSE(servesim_bin().empty());
  TempDir dir;
  const fs::path d = dir.path();
  std::ofstream(d / "sweep.toml") << kSweep;
  const ProcessResult clean = servesim({"sweep", "sweep.toml", "--db", "clean.db", "--jobs", "2", "--quiet"}, d);
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  const std::string expected = dump_results((d / "clean.db").string());
  int64_t runs = 0;
  int killed = 0;
  // As for runs: the schedule goes on until half of the planned kills have landed mid-sweep (a resumed
  // sweep has less left to do, so late kills often find it finished).
  const std::vector<double> fractions = kill_fractions(3 * kSweepKills, 2);
  for (size_t i = 0; i < fractions.size() && (i < kSweepKills || killed < kSweepKills / 2); ++i) {
    const double f = fractions[i];
    SCOPED_TRACE("killed at " + std::to_string(f) + " of " + std::to_string(clean.wall_seconds) + " s");
    const ProcessResult r =
        servesim({"sweep", "sweep.toml", "--db", "killed.db", "--jobs", "2", "--quiet"}, d, f * clean.wall_seconds);
    killed += r.signal == SIGKILL;
    EXPECT_TRUE(r.signal == SIGKILL || r.exit_code == 0) << r.err;
    if (!fs::exists(d / "killed.db")) continue;  // killed before the database was created
    const int64_t now = check_database(d / "killed.db");
    EXPECT_GE(now, runs) << "committed runs disappeared";
    runs = now;
    if (r.exit_code == 0) {
      // The resumed sweep finished before its kill: start again from nothing, so that the next
      // kills land in a sweep with work left.
      EXPECT_EQ(dump_results((d / "killed.db").string()), expected);
      fs::remove(d / "killed.db");
      runs = 0;
      continue;
    }
    SQLite::Database db((d / "killed.db").string(), SQLite::OPEN_READONLY);  // rolled back by check_database
    if (db.tableExists("points")) {
      EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM points WHERE run_id IS NOT NULL AND run_id NOT IN "
                              "(SELECT run_id FROM runs)")
                    .getInt64(),
                0)
          << "a point names a run that is not there";
    }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GE(killed, kSweepKills / 2);
  // Resumed to the end, the database holds what the uninterrupted sweep wrote.
  const ProcessResult rest = servesim({"sweep", "sweep.toml", "--db", "killed.db", "--jobs", "2", "--quiet"}, d);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  check_database(d / "killed.db");
  EXPECT_EQ(dump_results((d / "killed.db").string()), expected);
}

// Finding F2 (issue 7, fixed): the state a kill between CsvSink's renames leaves
// (requests.csv holds a run runs.csv does not name), then a new run: its id is past every file's.
TEST(CrashSafetyTest, CsvOrphanRowsOfAKilledRunAreNotReused) {
  TempDir dir;
  const fs::path d = dir.path();
  std::ofstream(d / "run.toml") << kRunConfig;
  const std::vector<std::string> args = {"run", "run.toml", "--no-db", "--csv", "csv", "--set",
                                         "workload.max_requests=10"};
  ASSERT_EQ(servesim(args, d).exit_code, 0);
  {
    std::ifstream in(d / "csv" / "runs.csv", std::ios::binary);
    std::string header;
    std::getline(in, header);
    std::ofstream(d / "csv" / "runs.csv", std::ios::binary | std::ios::trunc) << header << "\n";
  }
  ASSERT_EQ(servesim(args, d).exit_code, 0);
  EXPECT_EQ(check_csv(d / "csv"), 1);
}

}  // namespace
}  // namespace servesim::testing
