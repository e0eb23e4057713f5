#include "sim/metrics/sqlite_sink.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <filesystem>

#include "sim/core/crash_point.h"
#include "sim/core/error.h"

namespace servesim::metrics {
namespace {

// 2: MFU per precision, arrival-window figures, requests in system, engine times; 3: timed-out requests,
// the requests' load stage; 4: speculative decoding (runs: spec_*, tokens_per_gap; replica_stats:
// spec_draft_tokens, spec_accepted_tokens).
constexpr int kSchemaVersion = 4;

std::string runs_columns_sql() {
  std::string cols =
      "run_id INTEGER PRIMARY KEY,\n  config_hash TEXT NOT NULL,\n  seed INTEGER NOT NULL,\n"
      "  version TEXT NOT NULL,\n  config TEXT NOT NULL";
  for (const auto& v : flatten(RunSummary{})) cols += ",\n  " + v.name + (v.integer ? " INTEGER" : " REAL");
  return cols;
}

}  // namespace

static std::string replica_stats_columns_sql() {
  std::string cols = "run_id INTEGER NOT NULL REFERENCES runs(run_id),\n  replica INTEGER NOT NULL,\n"
                     "  role TEXT NOT NULL,\n  gpu TEXT NOT NULL";
  for (const auto& v : flatten(ReplicaStats{})) cols += ",\n  " + v.name + (v.integer ? " INTEGER" : " REAL");
  return cols;
}

std::string sqlite_schema() {
  return "CREATE TABLE IF NOT EXISTS runs (\n  " + runs_columns_sql() +
         "\n);\n"
         "CREATE TABLE IF NOT EXISTS requests (\n"
         "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
         "  request_id INTEGER NOT NULL,\n"
         "  replica INTEGER NOT NULL,\n"
         "  outcome TEXT NOT NULL,\n"
         "  prompt_tokens INTEGER NOT NULL,\n"
         "  output_tokens INTEGER NOT NULL,\n"
         "  arrival_ns INTEGER NOT NULL,\n"
         "  first_token_ns INTEGER,\n"
         "  finish_ns INTEGER,\n"
         "  ttft_ms REAL,\n"
         "  tpot_ms REAL,\n"
         "  e2e_ms REAL,\n"
         "  preemptions INTEGER NOT NULL,\n"
         "  meets_slo INTEGER NOT NULL,\n"
         "  cached_tokens INTEGER NOT NULL,\n"
         "  decode_replica INTEGER NOT NULL,\n"
         "  kv_transfer_bytes REAL NOT NULL,\n"
         "  engine_first_token_ns INTEGER,\n"
         "  engine_finish_ns INTEGER,\n"
         "  stage INTEGER NOT NULL\n"
         ");\n"
         "CREATE INDEX IF NOT EXISTS requests_by_run ON requests(run_id, request_id);\n"
         "CREATE TABLE IF NOT EXISTS replica_timeseries (\n"
         "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
         "  replica INTEGER NOT NULL,\n"
         "  time_ns INTEGER NOT NULL,\n"
         "  queued INTEGER NOT NULL,\n"
         "  running INTEGER NOT NULL,\n"
         "  kv_blocks_used INTEGER NOT NULL,\n"
         "  kv_blocks_total INTEGER NOT NULL\n"
         ");\n"
         "CREATE INDEX IF NOT EXISTS timeseries_by_run ON replica_timeseries(run_id, replica, time_ns);\n"
         "CREATE TABLE IF NOT EXISTS replica_stats (\n  " + replica_stats_columns_sql() + "\n);\n";
}

void SqliteSink::fail(const std::string& what, const std::exception& e) const {
  throw core::Error(path_ + ": " + what + ": " + e.what());
}

SqliteSink::SqliteSink(const std::string& path) : path_(path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw core::Error(path + ": is a directory, expected a results database file (--db FILE)");
  try {
    db_ = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db_->exec("PRAGMA busy_timeout = 60000");
    const int version = db_->execAndGet("PRAGMA user_version").getInt();
    const bool has_runs = db_->tableExists("runs");
    if (has_runs && version != kSchemaVersion)
      throw core::Error(path + ": holds results of another servesim database layout (user_version " +
                        std::to_string(version) + ", this version writes " + std::to_string(kSchemaVersion) +
                        "); write to a new file with --db");
    if (!has_runs) {
      SQLite::Transaction tx(*db_);
      db_->exec(sqlite_schema());
      db_->exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
      tx.commit();
    }
  } catch (const core::Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("cannot open or create the results database (is the directory there and writable?)", e);
  }
}

SqliteSink::~SqliteSink() = default;  // an uncommitted transaction rolls back here

void SqliteSink::begin_run(RunInfo& info) {
  try {
    tx_ = std::make_unique<SQLite::Transaction>(*db_);
    SQLite::Statement st(*db_, "INSERT INTO runs (run_id, config_hash, seed, version, config) VALUES (?, ?, ?, ?, ?)");
    if (info.run_id > 0) st.bind(1, static_cast<int64_t>(info.run_id));
    st.bind(2, info.config_hash);
    st.bind(3, static_cast<int64_t>(info.seed));
    st.bind(4, info.version);
    st.bind(5, info.config_toml);
    st.exec();
    run_id_ = db_->getLastInsertRowid();
    info.run_id = run_id_;
    core::crash_point("sqlite.run_begun");
    insert_request_ = std::make_unique<SQLite::Statement>(
        *db_,
        "INSERT INTO requests (run_id, request_id, replica, outcome, prompt_tokens, output_tokens, arrival_ns, "
        "first_token_ns, finish_ns, ttft_ms, tpot_ms, e2e_ms, preemptions, meets_slo, cached_tokens, "
        "decode_replica, kv_transfer_bytes, engine_first_token_ns, engine_finish_ns, stage) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    insert_sample_ = std::make_unique<SQLite::Statement>(
        *db_,
        "INSERT INTO replica_timeseries (run_id, replica, time_ns, queued, running, kv_blocks_used, "
        "kv_blocks_total) VALUES (?, ?, ?, ?, ?, ?, ?)");
  } catch (const std::exception& e) {
    fail("cannot start a run in the results database", e);
  }
}

void SqliteSink::add_request(const core::RequestRecord& r, const RequestMetrics& m) {
  try {
    SQLite::Statement& st = *insert_request_;
    const bool completed = r.outcome == core::RequestOutcome::kCompleted;
    st.bind(1, run_id_);
    st.bind(2, static_cast<int64_t>(r.id));
    st.bind(3, static_cast<int64_t>(r.replica));
    st.bindNoCopy(4, core::outcome_name(r.outcome).data());
    st.bind(5, r.prompt_tokens);
    st.bind(6, r.output_tokens);
    st.bind(7, r.arrival.ns());
    if (completed) {
      st.bind(8, r.client_first_token.ns());
      st.bind(9, r.client_finish.ns());
      st.bind(10, m.ttft_ms);
      if (m.tpot_ms) st.bind(11, *m.tpot_ms); else st.bind(11);
      st.bind(12, m.e2e_ms);
      st.bind(18, r.first_token.ns());
      st.bind(19, r.finish.ns());
    } else if (r.outcome == core::RequestOutcome::kTimedOut) {
      // When the client gave up, and when the engine let go; no latencies.
      for (int i : {8, 10, 11, 12, 18}) st.bind(i);
      st.bind(9, r.client_finish.ns());
      st.bind(19, r.finish.ns());
    } else {
      for (int i : {8, 9, 10, 11, 12, 18, 19}) st.bind(i);
    }
    st.bind(20, static_cast<int64_t>(r.stage));
    st.bind(13, static_cast<int64_t>(r.preemptions));
    st.bind(14, m.meets_slo ? 1 : 0);
    st.bind(15, r.cached_tokens);
    st.bind(16, static_cast<int64_t>(r.decode_replica));
    st.bind(17, r.kv_transfer_bytes);
    st.exec();
    st.reset();
    core::crash_point("sqlite.request_row");
  } catch (const std::exception& e) {
    fail("cannot write a request row", e);
  }
}

void SqliteSink::add_sample(const ReplicaSample& s) {
  try {
    SQLite::Statement& st = *insert_sample_;
    st.bind(1, run_id_);
    st.bind(2, static_cast<int64_t>(s.replica));
    st.bind(3, s.time_ns);
    st.bind(4, s.queued);
    st.bind(5, s.running);
    st.bind(6, s.kv_blocks_used);
    st.bind(7, s.kv_blocks_total);
    st.exec();
    st.reset();
  } catch (const std::exception& e) {
    fail("cannot write a time-series row", e);
  }
}

void SqliteSink::add_replica_stats(const ReplicaStats& r) {
  try {
    const auto values = flatten(r);
    std::string sql = "INSERT INTO replica_stats (run_id, replica, role, gpu";
    for (const auto& v : values) sql += ", " + v.name;
    sql += ") VALUES (?, ?, ?, ?";
    for (size_t i = 0; i < values.size(); ++i) sql += ", ?";
    sql += ")";
    SQLite::Statement st(*db_, sql);
    st.bind(1, run_id_);
    st.bind(2, static_cast<int64_t>(r.replica));
    st.bind(3, r.role);
    st.bind(4, r.gpu);
    int k = 5;
    for (const auto& v : values) {
      if (v.integer) st.bind(k++, static_cast<int64_t>(v.value)); else st.bind(k++, v.value);
    }
    st.exec();
  } catch (const std::exception& e) {
    fail("cannot write a replica_stats row", e);
  }
}

void SqliteSink::end_run(const RunSummary& summary) {
  try {
    const auto values = flatten(summary);
    std::string sql = "UPDATE runs SET ";
    for (size_t i = 0; i < values.size(); ++i) sql += (i ? ", " : "") + values[i].name + " = ?";
    sql += " WHERE run_id = ?";
    SQLite::Statement st(*db_, sql);
    int k = 1;
    for (const auto& v : values) {
      if (v.integer) st.bind(k++, static_cast<int64_t>(v.value)); else st.bind(k++, v.value);
    }
    st.bind(k, run_id_);
    st.exec();
    if (before_commit_) before_commit_(*db_, run_id_);
    insert_request_.reset();
    insert_sample_.reset();
    core::crash_point("sqlite.before_commit");
    tx_->commit();
    tx_.reset();
    core::crash_point("sqlite.committed");
  } catch (const std::exception& e) {
    fail("cannot commit the run", e);
  }
}

}  // namespace servesim::metrics
