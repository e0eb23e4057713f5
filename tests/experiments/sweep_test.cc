// Sweeps: the same database for any --jobs, shards that merge into the whole, resuming, refusals.
#include "experiments/sweep.h"

#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "experiments/cli/cli.h"
#include "experiments/results_db.h"
#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "tests/experiments/results_dump.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::dump_results;
using servesim::testing::file_bytes;
using servesim::testing::TempDir;

const std::string kExperiment = R"(
name = "routers"
seeds = [1, 2]
[base]
seed = 1
[base.workload]
kind = "poisson"
rate = 20.0
max_requests = 200
[base.workload.prompt]
kind = "uniform"
min = 50
max = 800
[base.workload.output]
kind = "uniform"
min = 1
max = 200
[base.model]
kind = "llama-3-8b"
[base.gpu]
kind = "h100-sxm"
[base.cluster]
replicas = 2
[base.slo]
ttft_ms = 500
tpot_ms = 50
[base.output]
sample_interval_ms = 500
[[axis]]
key = "router.kind"
values = ["round_robin", "least_outstanding"]
[[axis]]
key = "workload.rate"
values = [20.0, 40.0, 80.0]
)";

Experiment experiment(const std::string& text = kExperiment) { return Experiment::parse(text, "routers.toml", "."); }

SweepStats sweep(const std::string& db, int jobs, int64_t shard = 0, int64_t shards = 1,
                 const std::string& text = kExperiment) {
  Experiment e = experiment(text);
  SweepOptions o;
  o.db_path = db;
  o.jobs = jobs;
  o.shard_index = shard;
  o.shard_count = shards;
  return run_sweep(e, o);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

TEST(SweepTest, AnyNumberOfJobsWritesTheSameBytes) {
  TempDir dir;
  const SweepStats one = sweep(dir.file("1.db"), 1);
  EXPECT_EQ(one.points, 12);
  EXPECT_EQ(one.ran, 12);
  EXPECT_EQ(one.results.size(), 12u);
  sweep(dir.file("2.db"), 2);
  sweep(dir.file("3.db"), 3);
  const std::string bytes = file_bytes(dir.file("1.db"));
  ASSERT_GT(bytes.size(), 10000u);
  EXPECT_TRUE(bytes == file_bytes(dir.file("2.db")));
  EXPECT_TRUE(bytes == file_bytes(dir.file("3.db")));

  // Every point is a whole run, numbered point_index + 1, with its settings.
  SQLite::Database db(dir.file("1.db"), SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM points WHERE run_id = point_index + 1").getInt(), 12);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM runs").getInt(), 12);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM requests").getInt(), 12 * 200);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM point_settings").getInt(), 12 * 3);
  EXPECT_EQ(db.execAndGet("SELECT label FROM points WHERE point_index = 7").getString(),
            "router.kind=least_outstanding workload.rate=20.0 seed=2");
  EXPECT_EQ(db.execAndGet("SELECT value FROM point_settings WHERE point_index = 7 AND key = 'router.kind'").getString(),
            "\"least_outstanding\"");
  EXPECT_EQ(db.execAndGet("SELECT p.point_key = r.config_hash FROM points p JOIN runs r USING (run_id) "
                          "WHERE point_index = 5").getInt(), 1);
  EXPECT_EQ(db.execAndGet("SELECT value FROM experiment WHERE key = 'name'").getString(), "routers");
  EXPECT_EQ(db.execAndGet("SELECT value FROM experiment WHERE key = 'points'").getString(), "12");
  // A run swept is the run `servesim run` gives for the same configuration.
  Experiment e = experiment();
  e.check(1);
  RunResult direct = run_simulation(e.resolve(e.points()[7].settings), RunOutputs{});
  EXPECT_DOUBLE_EQ(db.execAndGet("SELECT ttft_ms_p90 FROM runs WHERE run_id = 8").getDouble(), direct.summary.ttft_ms.p90);
  EXPECT_EQ(one.results[7].second.requests_meeting_slo, direct.summary.requests_meeting_slo);
}

TEST(SweepTest, ShardsMergeIntoTheWholeSweepIdempotently) {
  TempDir dir;
  sweep(dir.file("whole.db"), 2);
  int64_t in_shards = 0;
  for (int64_t i = 0; i < 3; ++i) {
    const SweepStats s = sweep(dir.file("shard" + std::to_string(i) + ".db"), 1, i, 3);
    EXPECT_EQ(s.in_shard, 4);
    in_shards += s.ran;
  }
  EXPECT_EQ(in_shards, 12);
  const std::vector<std::string> shards = {dir.file("shard0.db"), dir.file("shard1.db"), dir.file("shard2.db")};
  MergeStats m = merge_databases(dir.file("merged.db"), shards);
  EXPECT_EQ(m.points_added, 12);
  EXPECT_EQ(m.points_total, 12);
  EXPECT_EQ(m.points_expected, 12);
  const std::string whole = dump_results(dir.file("whole.db"));
  EXPECT_EQ(dump_results(dir.file("merged.db")), whole);
  // Again: nothing changes.
  m = merge_databases(dir.file("merged.db"), shards);
  EXPECT_EQ(m.points_added, 0);
  EXPECT_EQ(m.points_already, 12);
  EXPECT_EQ(dump_results(dir.file("merged.db")), whole);
  // In another order, one at a time, with a repeat: the same content.
  merge_databases(dir.file("other.db"), {dir.file("shard2.db")});
  merge_databases(dir.file("other.db"), {dir.file("shard0.db"), dir.file("shard2.db"), dir.file("shard1.db")});
  EXPECT_EQ(dump_results(dir.file("other.db")), whole);
  // The merged database is a sweep database: a re-run there has nothing left to do.
  EXPECT_EQ(sweep(dir.file("merged.db"), 2).ran, 0);
}

TEST(SweepTest, RerunSkipsCommittedPointsAndFinishesIdentically) {
  TempDir dir;
  sweep(dir.file("whole.db"), 2);
  EXPECT_EQ(sweep(dir.file("part.db"), 1, 1, 2).ran, 6);
  const SweepStats rest = sweep(dir.file("part.db"), 2);
  EXPECT_EQ(rest.already_done, 6);
  EXPECT_EQ(rest.ran, 6);
  EXPECT_EQ(dump_results(dir.file("part.db")), dump_results(dir.file("whole.db")));
}

TEST(SweepTest, DatabasesOfOtherExperimentsAreRefused) {
  TempDir dir;
  sweep(dir.file("a.db"), 2, 0, 2);
  std::string other = kExperiment;
  other.replace(other.find("80.0"), 4, "60.0");
  sweep(dir.file("b.db"), 2, 0, 2, other);

  std::string err = error_of([&] { sweep(dir.file("a.db"), 2, 1, 2, other); });
  EXPECT_NE(err.find("a.db: holds the results of sweep 'routers'"), std::string::npos) << err;
  EXPECT_NE(err.find("never mixed"), std::string::npos) << err;

  err = error_of([&] { merge_databases(dir.file("m.db"), {dir.file("a.db"), dir.file("b.db")}); });
  EXPECT_NE(err.find("b.db"), std::string::npos) << err;
  EXPECT_NE(err.find("only shards of one experiment merge"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("m.db")));

  merge_databases(dir.file("m.db"), {dir.file("a.db")});
  err = error_of([&] { merge_databases(dir.file("m.db"), {dir.file("b.db")}); });
  EXPECT_NE(err.find("m.db: holds sweep 'routers'"), std::string::npos) << err;

  // A database of plain runs is no experiment's.
  const std::string plain = dir.file("plain.db");
  Experiment e = experiment();
  e.check(1);
  run_simulation(e.resolve(e.points()[0].settings), RunOutputs{plain, ""});
  err = error_of([&] { sweep(plain, 1); });
  EXPECT_NE(err.find("not part of an experiment"), std::string::npos) << err;
  err = error_of([&] { merge_databases(dir.file("m2.db"), {plain}); });
  EXPECT_NE(err.find("not an experiment database"), std::string::npos) << err;
  err = error_of([&] { merge_databases(dir.file("a.db"), {dir.file("a.db")}); });
  EXPECT_NE(err.find("output database itself"), std::string::npos) << err;
  err = error_of([&] { merge_databases(dir.file("m3.db"), {dir.file("missing.db")}); });
  EXPECT_NE(err.find("missing.db: no such results database"), std::string::npos) << err;
}

TEST(SweepTest, ARunTimeFailureStopsAfterTheEarlierPointsAreCommitted) {
  TempDir dir;
  std::ofstream(dir.file("trace.csv")) << "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                          "2023-11-16 18:15:46.0000000,374,44\n"
                                          "2023-11-16 18:15:47.0000000,396,109\n"
                                          "2023-11-16 18:15:48.0000000,396,109\n";
  std::ofstream(dir.file("e.toml")) << R"(
[base]
[base.workload]
kind = "azure_csv"
path = "trace.csv"
[base.model]
kind = "llama-3-8b"
[base.gpu]
kind = "h100-sxm"
[[axis]]
key = "workload.window_start_s"
values = [0.0, 1.5, 100.0]
)";
  Experiment e = Experiment::load(dir.file("e.toml"));
  SweepOptions o;
  o.db_path = dir.file("r.db");
  o.jobs = 2;
  const std::string err = error_of([&] { run_sweep(e, o); });
  EXPECT_NE(err.find("point 2 (workload.window_start_s=100.0)"), std::string::npos) << err;
  EXPECT_NE(err.find("no requests"), std::string::npos) << err;
  SQLite::Database db(dir.file("r.db"), SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM points").getInt(), 2);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM requests").getInt(), 3 + 1);
}

TEST(SweepTest, CommandLineProgressAndListing) {
  TempDir dir;
  const std::string exp = dir.file("routers.toml");
  std::ofstream(exp) << kExperiment;
  std::ostringstream out, err;
  const std::string db = dir.file("cli.db");
  const char* argv[] = {"servesim", "sweep", exp.c_str(), "--db", db.c_str(), "--jobs", "2"};
  ASSERT_EQ(run_cli(7, argv, out, err), 0) << err.str();
  EXPECT_NE(err.str().find("sweep 'routers': 12 points, 2 jobs, into"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("sweep: 12/12 done in"), std::string::npos) << err.str();
  EXPECT_NE(out.str().find("0 already in"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("router.kind=least_outstanding workload.rate=80.0 seed=2"), std::string::npos);
  EXPECT_EQ(dump_results(db), [&] {
    sweep(dir.file("api.db"), 1);
    return dump_results(dir.file("api.db"));
  }());

  std::ostringstream out2, err2;
  const char* list[] = {"servesim", "sweep", exp.c_str(), "--list"};
  ASSERT_EQ(run_cli(4, list, out2, err2), 0) << err2.str();
  EXPECT_NE(out2.str().find("12 points"), std::string::npos) << out2.str();
  EXPECT_NE(out2.str().find("11     "), std::string::npos) << out2.str();

  std::ostringstream out3, err3;
  const char* bad[] = {"servesim", "sweep", exp.c_str(), "--db", db.c_str(), "--shard", "3/3"};
  EXPECT_EQ(run_cli(7, bad, out3, err3), 1);
  EXPECT_NE(err3.str().find("0 <= I < N"), std::string::npos) << err3.str();

  std::ostringstream out4, err4;
  const std::string merged = dir.file("m.db");
  const char* merge[] = {"servesim", "merge", merged.c_str(), db.c_str(), "--require-complete"};
  EXPECT_EQ(run_cli(5, merge, out4, err4), 0) << err4.str();
  EXPECT_NE(out4.str().find("12 points added"), std::string::npos) << out4.str();
}

TEST(SweepTest, ProgressBarOnATerminalPlainLinesOtherwise) {
  std::ostringstream tty, plain;
  Progress bar(&tty, true, "sweep", 4);
  Progress lines(&plain, false, "sweep", 4, /*period_s=*/0);
  for (int i = 0; i < 4; ++i) {
    bar.advance();
    lines.advance();
  }
  bar.finish();
  lines.finish();
  // Redrawn in place: carriage returns, a bar, done/total, a rate, an ETA, then the total time.
  EXPECT_NE(tty.str().find("\rsweep [" + std::string(30, '.') + "] 0/4"), std::string::npos) << tty.str();
  EXPECT_NE(tty.str().find("] 4/4"), std::string::npos) << tty.str();
  EXPECT_NE(tty.str().find("[##############################] 4/4"), std::string::npos) << tty.str();
  EXPECT_NE(tty.str().find("done in 0:00"), std::string::npos) << tty.str();
  EXPECT_EQ(tty.str().back(), '\n');
  // One line per period (here: every point) and one at the end; no carriage returns.
  EXPECT_NE(plain.str().find("sweep: 1/4 (25.0%), "), std::string::npos) << plain.str();
  EXPECT_NE(plain.str().find("/s, ETA "), std::string::npos) << plain.str();
  EXPECT_NE(plain.str().find("sweep: 4/4 done in "), std::string::npos) << plain.str();
  EXPECT_EQ(plain.str().find('\r'), std::string::npos);
}

TEST(SweepTest, ShardSyntax) {
  EXPECT_EQ(parse_shard("0/4"), (std::pair<int64_t, int64_t>{0, 4}));
  EXPECT_EQ(parse_shard("3/4"), (std::pair<int64_t, int64_t>{3, 4}));
  for (const char* bad : {"4/4", "-1/4", "1/0", "a/4", "1", "1/", "/4", "1/4x"})
    EXPECT_THROW(parse_shard(bad), core::Error) << bad;
}

}  // namespace
}  // namespace servesim::experiments

// Request classes (issue 17): shards whose runs have classes merge their class_stats, into an OUT
// that has none yet (the table comes with the first input that has it) and idempotently.
namespace servesim::experiments {
namespace {

TEST(SweepTest, ShardsWithRequestClassesMergeTheirClassStats) {
  TempDir dir;
  std::string text = kExperiment;
  text.replace(text.find("[base.model]"), 12,
               "[[base.workload.classes]]\nname = \"premium\"\nshare = 1\n[[base.workload.classes]]\nname = "
               "\"batch\"\nshare = 3\npriority = 1\n[base.model]");
  for (int64_t i = 0; i < 2; ++i) sweep(dir.file("shard" + std::to_string(i) + ".db"), 1, i, 2, text);
  const std::string out = dir.file("merged.db");
  merge_databases(out, {dir.file("shard0.db"), dir.file("shard1.db")});
  merge_databases(out, {dir.file("shard1.db")});  // again: nothing new
  SQLite::Database db(out, SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM class_stats").getInt(), 12 * 2);  // every run, both classes
  EXPECT_EQ(db.execAndGet("SELECT SUM(requests) FROM class_stats").getInt(), 12 * 200);
  EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), 8);
  // The requests' class column came along: each class's rows are its class_stats requests.
  for (const char* c : {"premium", "batch"})
    EXPECT_EQ(db.execAndGet(std::string("SELECT COUNT(*) FROM requests WHERE class = '") + c + "'").getInt(),
              db.execAndGet(std::string("SELECT SUM(requests) FROM class_stats WHERE class = '") + c + "'").getInt())
        << c;
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM requests WHERE class IS NULL").getInt(), 0);
}

}  // namespace
}  // namespace servesim::experiments

// The sweep recycles its point buffers (a slot's vectors keep the capacity an earlier point grew
// them to). A slot that held a large point and then a small one must hand over the small point's
// rows only, in the order they came: the points below alternate 300 and a handful of requests, so
// with 2 (--jobs 1) or 4 (--jobs 2) slots every small point lands in a slot a large one used.
namespace servesim::experiments {
namespace {

const std::string kSizes = R"(
name = "sizes"
seeds = [1]
[base]
seed = 1
[base.workload]
kind = "poisson"
rate = 40.0
max_requests = 10
[base.workload.prompt]
kind = "uniform"
min = 50
max = 800
[base.workload.output]
kind = "uniform"
min = 1
max = 200
[base.model]
kind = "llama-3-8b"
[base.gpu]
kind = "h100-sxm"
[base.cluster]
replicas = 2
[base.output]
sample_interval_ms = 500
[[axis]]
key = "workload.max_requests"
values = [300, 7, 250, 1, 280, 2, 260, 3]
)";

std::vector<std::string> rows_of(const std::string& path, const std::string& table, int64_t run_id,
                                 const std::string& columns) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement st(db, "SELECT " + columns + " FROM " + table + " WHERE run_id = ? ORDER BY rowid");
  st.bind(1, run_id);
  std::vector<std::string> out;
  while (st.executeStep()) {
    std::string row;
    for (int i = 0; i < st.getColumnCount(); ++i) row += (i ? "|" : "") + st.getColumn(i).getString();
    out.push_back(row);
  }
  return out;
}

TEST(SweepTest, RecycledBuffersHandOverOnlyTheirOwnPointsRowsInOrder) {
  TempDir dir;
  const std::vector<int64_t> sizes = {300, 7, 250, 1, 280, 2, 260, 3};
  for (int jobs : {1, 2}) {
    const std::string path = dir.file("j" + std::to_string(jobs) + ".db");
    sweep(path, jobs, 0, 1, kSizes);
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM requests").getInt64(), 300 + 7 + 250 + 1 + 280 + 2 + 260 + 3);
    for (size_t i = 0; i < sizes.size(); ++i) {
      // Point i is run i + 1 and holds requests 0 .. n - 1 exactly once (n = its max_requests).
      SQLite::Statement st(db, "SELECT COUNT(*), COUNT(DISTINCT request_id), MIN(request_id), MAX(request_id) "
                               "FROM requests WHERE run_id = ?");
      st.bind(1, static_cast<int64_t>(i + 1));
      ASSERT_TRUE(st.executeStep());
      EXPECT_EQ(st.getColumn(0).getInt64(), sizes[i]) << "jobs " << jobs << " point " << i;
      EXPECT_EQ(st.getColumn(1).getInt64(), sizes[i]) << "jobs " << jobs << " point " << i;
      EXPECT_EQ(st.getColumn(2).getInt64(), 0) << "jobs " << jobs << " point " << i;
      EXPECT_EQ(st.getColumn(3).getInt64(), sizes[i] - 1) << "jobs " << jobs << " point " << i;
    }
    // Every run's rows sit together, in point order (rowids follow the points).
    EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM requests a JOIN requests b ON b.rowid = a.rowid + 1 "
                            "WHERE b.run_id < a.run_id").getInt(), 0);
  }
  EXPECT_EQ(dump_results(dir.file("j1.db")), dump_results(dir.file("j2.db")));
  // The small points after large ones, against the same configuration written straight to a
  // database of its own by `servesim run` (no buffer in between): the same rows in the same order.
  Experiment e = experiment(kSizes);
  e.check(1);
  const std::string request_columns =
      "request_id, replica, outcome, prompt_tokens, output_tokens, arrival_ns, first_token_ns, finish_ns, ttft_ms, "
      "tpot_ms, e2e_ms, preemptions, meets_slo, cached_tokens, decode_replica, kv_transfer_bytes, "
      "engine_first_token_ns, engine_finish_ns, stage";
  const std::string sample_columns = "replica, time_ns, queued, running, kv_blocks_used, kv_blocks_total";
  for (size_t i : {1, 3, 5, 7}) {
    RunOutputs o;
    o.db_path = dir.file("direct" + std::to_string(i) + ".db");
    run_simulation(e.resolve(e.points()[i].settings), o);
    const auto direct = rows_of(o.db_path, "requests", 1, request_columns);
    ASSERT_EQ(direct.size(), static_cast<size_t>(sizes[i]));
    EXPECT_EQ(rows_of(dir.file("j2.db"), "requests", static_cast<int64_t>(i + 1), request_columns), direct) << i;
    const auto samples = rows_of(o.db_path, "replica_timeseries", 1, sample_columns);
    EXPECT_FALSE(samples.empty());
    EXPECT_EQ(rows_of(dir.file("j2.db"), "replica_timeseries", static_cast<int64_t>(i + 1), sample_columns), samples)
        << i;
  }
}


// Each worker thread recycles the storage of its cost models' memos (hwmodels/recycled_rows.h), so a
// point's model takes pages an earlier point's model on that thread filled with its own seconds.
// Points of two models (sharing a cost model configuration two by two: the seeds and rates repeat
// it) are swept in one order with one thread and in the reverse order with two; every point must
// give, row for row, what it gives run alone on a thread that never ran anything.
std::string memo_experiment(bool reversed) {
  const std::string models = reversed ? R"(["qwen2-7b", "llama-3-8b"])" : R"(["llama-3-8b", "qwen2-7b"])";
  const std::string rates = reversed ? "[80.0, 20.0]" : "[20.0, 80.0]";
  return R"(
name = "memo"
seeds = [1, 2]
[base]
seed = 1
[base.workload]
kind = "poisson"
rate = 20.0
max_requests = 150
[base.workload.prompt]
kind = "uniform"
min = 50
max = 3000
[base.workload.output]
kind = "uniform"
min = 1
max = 200
[base.model]
kind = "llama-3-8b"
[base.gpu]
kind = "h100-sxm"
[base.cost_model]
calibration = ")" + servesim::testing::source_dir() + R"(/calibration/profiles/h100-sxm.toml"
[base.cluster]
replicas = 2
[base.output]
sample_interval_ms = 500
[[axis]]
key = "model.kind"
values = )" + models + R"(
[[axis]]
key = "workload.rate"
values = )" + rates + "\n";
}

TEST(SweepTest, RecycledCostMemoGivesEachPointItsOwnFigures) {
  TempDir dir;
  const std::string forward = memo_experiment(false), backward = memo_experiment(true);
  sweep(dir.file("forward.db"), 1, 0, 1, forward);
  sweep(dir.file("backward.db"), 2, 0, 1, backward);
  const std::string request_columns =
      "request_id, replica, outcome, prompt_tokens, output_tokens, arrival_ns, first_token_ns, finish_ns, ttft_ms, "
      "tpot_ms, e2e_ms, preemptions, meets_slo, cached_tokens";
  const std::string run_columns =
      "requests_total, requests_completed, sim_seconds, events, iterations, ttft_ms_mean, ttft_ms_p90, tpot_ms_mean, "
      "tpot_ms_p99, itl_ms_p99, e2e_ms_mean, e2e_ms_p90";
  auto run_of = [](const std::string& path, const std::string& label) {
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    SQLite::Statement st(db, "SELECT run_id FROM points WHERE label = ?");
    st.bind(1, label);
    EXPECT_TRUE(st.executeStep()) << label;
    return st.getColumn(0).getInt64();
  };
  Experiment e = experiment(forward);
  e.check(1);
  ASSERT_EQ(e.points().size(), 8u);
  for (const Point& p : e.points()) {
    const std::string label = p.label();
    // Alone: `servesim run`'s path into a database of its own, on a thread with an empty pool.
    RunOutputs o;
    o.db_path = dir.file("alone" + std::to_string(p.index) + ".db");
    std::thread([&] { run_simulation(e.resolve(p.settings), o); }).join();
    const auto requests = rows_of(o.db_path, "requests", 1, request_columns);
    ASSERT_EQ(requests.size(), 150u) << label;
    const auto run = rows_of(o.db_path, "runs", 1, run_columns);
    for (const std::string db : {"forward.db", "backward.db"}) {
      const int64_t id = run_of(dir.file(db), label);
      EXPECT_EQ(rows_of(dir.file(db), "requests", id, request_columns), requests) << db << " " << label;
      EXPECT_EQ(rows_of(dir.file(db), "runs", id, run_columns), run) << db << " " << label;
    }
  }
  // The two models' figures differ (the memo was exercised by more than one model).
  EXPECT_NE(rows_of(dir.file("forward.db"), "runs", 1, run_columns), rows_of(dir.file("forward.db"), "runs", 5, run_columns));
}

}  // namespace
}  // namespace servesim::experiments
