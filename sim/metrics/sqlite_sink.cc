#include "sim/metrics/sqlite_sink.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <vector>

#include "sim/core/crash_point.h"
#include "sim/core/error.h"
#include "sim/core/format.h"
#include "sim/core/input_file.h"

namespace servesim::metrics {
namespace {

// 2: MFU per precision, arrival-window figures, requests in system, engine times; 3: timed-out requests,
// the requests' load stage; 4: the measurement window, batch-means intervals, stationarity; 5:
// speculative decoding (runs: spec_*, tokens_per_gap; replica_stats: spec_draft_tokens,
// spec_accepted_tokens); 6: request classes (table class_stats, created with the first run that has
// [[workload.classes]]; outcome rejected_admission). A version-5 database has the layout of a
// version-6 one without classes, so it is written into as it is (and keeps its user_version until
// a run brings a table it lacks). 7: the requests' class (requests.class, TEXT, the class's name),
// a column added (ALTER TABLE) with the first run that has classes: a database that never holds
// such a run keeps the version-6 layout, and rows of runs without classes hold NULL there.
// Versions 5 and 6 are written into as they are and become 7 with their first run with classes.
// 8: the runs' pull figures (pull_waits, pull_wait_s, pull_wait_max_ms, pulls_waiting_peak), columns
// added (ALTER TABLE) to an older database's runs table with the first run written into it; rows of
// the runs before hold NULL there.
constexpr int kSchemaVersion = 8;
constexpr int kOldestCompatibleVersion = 5;

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

namespace {

// Every table a servesim results database holds (runs, and a sweep's experiment tables).
bool servesim_table(const std::string& name) {
  static const std::set<std::string> names = {"runs",       "requests",      "replica_timeseries", "replica_stats",
                                              "experiment", "points",        "point_settings",     "fleet_events",
                                              "fleet_metrics", "class_stats"};
  return names.count(name) > 0;
}

uint32_t big_endian32(const unsigned char* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

}  // namespace

void check_results_database(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // a new file (or an unwritable path: opening says so)
  if (S_ISDIR(st.st_mode)) throw core::Error(path + ": is a directory, expected a results database file (--db FILE)");
  if (!S_ISREG(st.st_mode))
    throw core::Error(path + ": " + core::file_kind_problem(path) +
                      ", not a regular file: servesim keeps results only in regular database files");
  if (st.st_size == 0) return;
  unsigned char header[100] = {};
  ssize_t got = 0;
  if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    got = ::pread(fd, header, sizeof header, 0);
    ::close(fd);
  }
  const std::string_view head(reinterpret_cast<const char*>(header), got > 0 ? static_cast<size_t>(got) : 0);
  if (head.substr(0, 16) != std::string_view("SQLite format 3\0", 16)) {
    std::string what = core::binary_format_problem(head, path);
    std::string shown;
    for (unsigned char c : head.substr(0, 16)) shown += (c >= 0x20 && c < 0x7f && c != '\'') ? static_cast<char>(c) : '.';
    throw core::Error(path + ": exists and is not an SQLite database (" +
                      (what.empty() ? "it starts with '" + shown + "'" : "it " + what.substr(0, what.find(':'))) +
                      "); servesim never writes into a file of another kind: choose another database path");
  }
  if (got < 100) return;  // SQLite will say what is wrong with a truncated header
  const uint32_t application_id = big_endian32(header + 68);
  if (application_id == static_cast<uint32_t>(kApplicationId)) return;
  if (application_id != 0) {
    char id[16];
    std::snprintf(id, sizeof id, "0x%08x", application_id);
    throw core::Error(path + ": is the SQLite database of another application (application_id " + id +
                      "); servesim writes its tables only into its own databases: choose another database path");
  }
  // Unmarked: empty, or written by an earlier servesim (a runs table, nothing foreign), or foreign.
  std::vector<std::string> tables, foreign;
  try {
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    db.exec("PRAGMA busy_timeout = 60000");
    SQLite::Statement st_tables(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                                    "ORDER BY name");
    while (st_tables.executeStep()) tables.push_back(st_tables.getColumn(0).getString());
  } catch (const std::exception& e) {
    throw core::Error(path + ": cannot read it as an SQLite database: " + e.what());
  }
  for (const auto& t : tables)
    if (!servesim_table(t)) foreign.push_back("'" + t + "'");
  const bool has_runs = std::find(tables.begin(), tables.end(), "runs") != tables.end();
  if (tables.empty() || (has_runs && foreign.empty())) return;
  if (foreign.size() > 8) {
    const size_t more = foreign.size() - 8;
    foreign.resize(8);
    foreign.push_back("and " + std::to_string(more) + " more");
  }
  throw core::Error(path + ": is an SQLite database servesim did not write (it holds the table" +
                    std::string(foreign.size() > 1 ? "s " : " ") + core::join(foreign) +
                    "); servesim writes its tables only into its own databases: choose another database path");
}

SqliteSink::SqliteSink(const std::string& path) : path_(path) {
  check_results_database(path);
  try {
    // One connection, used by one thread at a time (a sweep's in-order writer stage, then its caller):
    // no per-call locking (SQLite's multi-thread mode).
    db_ = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLite::OPEN_NOMUTEX);
    db_->exec("PRAGMA busy_timeout = 60000");
    const int version = db_->execAndGet("PRAGMA user_version").getInt();
    const bool has_runs = db_->tableExists("runs");
    if (has_runs && (version > kSchemaVersion || version < kOldestCompatibleVersion))
      throw core::Error(path + ": holds results of another servesim database layout (user_version " +
                        std::to_string(version) + ", this version writes " + std::to_string(kSchemaVersion) +
                        "); write to a new file with --db");
    if (!has_runs) {
      SQLite::Transaction tx(*db_);
      db_->exec(sqlite_schema());
      db_->exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
      db_->exec("PRAGMA application_id = " + std::to_string(kApplicationId));
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
    staged_ = false;
    fleet_tables_ = false;
    // A database an earlier version wrote is marked as servesim's with its first new run.
    if (db_->execAndGet("PRAGMA application_id").getInt() != kApplicationId)
      db_->exec("PRAGMA application_id = " + std::to_string(kApplicationId));
    // A database of an earlier layout gets the runs' columns it lacks (schema version 8).
    {
      std::set<std::string> have;
      SQLite::Statement cols(*db_, "SELECT name FROM pragma_table_info('runs')");
      while (cols.executeStep()) have.insert(cols.getColumn(0).getString());
      bool added = false;
      for (const auto& v : flatten(RunSummary{}))
        if (!have.count(v.name)) {
          db_->exec("ALTER TABLE runs ADD COLUMN " + v.name + (v.integer ? " INTEGER" : " REAL"));
          added = true;
        }
      if (added) db_->exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
    }
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
    class_names_ = info.class_names;
    if (!class_names_.empty()) {
      // Within the run's transaction: the column comes with the first run with classes.
      bool has_class = false;
      SQLite::Statement cols(*db_, "SELECT name FROM pragma_table_info('requests')");
      while (cols.executeStep()) has_class = has_class || cols.getColumn(0).getString() == "class";
      if (!has_class) db_->exec("ALTER TABLE requests ADD COLUMN class TEXT");
      db_->exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
    }
    // The insert statements are prepared once per layout and kept across runs (a sweep's points).
    if (const int columns = class_names_.empty() ? 20 : 21; !insert_request_ || columns != request_columns_) {
      request_columns_ = columns;
      const std::string insert =
          std::string("INSERT INTO requests (run_id, request_id, replica, outcome, prompt_tokens, output_tokens, "
                      "arrival_ns, first_token_ns, finish_ns, ttft_ms, tpot_ms, e2e_ms, preemptions, meets_slo, "
                      "cached_tokens, decode_replica, kv_transfer_bytes, engine_first_token_ns, engine_finish_ns, "
                      "stage") +
          (class_names_.empty() ? ") VALUES " : ", class) VALUES ");
      std::string row = "(?";
      for (int i = 1; i < request_columns_; ++i) row += ", ?";
      row += ")";
      std::string rows = row;
      for (size_t i = 1; i < kRequestBatch; ++i) rows += ", " + row;
      insert_request_ = std::make_unique<SQLite::Statement>(*db_, insert + row);
      insert_requests_ = std::make_unique<SQLite::Statement>(*db_, insert + rows);
    }
    pending_.clear();
    if (!insert_sample_)
      insert_sample_ = std::make_unique<SQLite::Statement>(
          *db_,
          "INSERT INTO replica_timeseries (run_id, replica, time_ns, queued, running, kv_blocks_used, "
          "kv_blocks_total) VALUES (?, ?, ?, ?, ?, ?, ?)");
  } catch (const std::exception& e) {
    fail("cannot start a run in the results database", e);
  }
}

void SqliteSink::bind_request(SQLite::Statement& st, int base, const core::RequestRecord& r,
                              const RequestMetrics& m) const {
  const bool completed = r.outcome == core::RequestOutcome::kCompleted;
  st.bind(base + 1, run_id_);
  st.bind(base + 2, static_cast<int64_t>(r.id));
  st.bind(base + 3, static_cast<int64_t>(r.replica));
  st.bindNoCopy(base + 4, core::outcome_name(r.outcome).data());
  st.bind(base + 5, r.prompt_tokens);
  st.bind(base + 6, r.output_tokens);
  st.bind(base + 7, r.arrival.ns());
  if (completed) {
    st.bind(base + 8, r.client_first_token.ns());
    st.bind(base + 9, r.client_finish.ns());
    st.bind(base + 10, m.ttft_ms);
    if (m.tpot_ms) st.bind(base + 11, *m.tpot_ms); else st.bind(base + 11);
    st.bind(base + 12, m.e2e_ms);
    st.bind(base + 18, r.first_token.ns());
    st.bind(base + 19, r.finish.ns());
  } else if (r.outcome == core::RequestOutcome::kTimedOut) {
    // When the client gave up, and when the engine let go; no latencies.
    for (int i : {8, 10, 11, 12, 18}) st.bind(base + i);
    st.bind(base + 9, r.client_finish.ns());
    st.bind(base + 19, r.finish.ns());
  } else {
    for (int i : {8, 9, 10, 11, 12, 18, 19}) st.bind(base + i);
  }
  st.bind(base + 20, static_cast<int64_t>(r.stage));
  if (!class_names_.empty()) st.bindNoCopy(base + 21, class_names_[r.request_class]);
  st.bind(base + 13, static_cast<int64_t>(r.preemptions));
  st.bind(base + 14, m.meets_slo ? 1 : 0);
  st.bind(base + 15, r.cached_tokens);
  st.bind(base + 16, static_cast<int64_t>(r.decode_replica));
  st.bind(base + 17, r.kv_transfer_bytes);
}

void SqliteSink::add_request(const core::RequestRecord& r, const RequestMetrics& m) {
  if (!class_names_.empty() && r.request_class >= class_names_.size())
    fail("cannot write a request row",
         core::Error("internal: request " + std::to_string(r.id) + " has class " + std::to_string(r.request_class) +
                     " of " + std::to_string(class_names_.size())));
  pending_.emplace_back(r, m);
  if (pending_.size() == kRequestBatch) flush_requests();
  core::crash_point("sqlite.request_row");
}

void SqliteSink::flush_requests() {
  if (pending_.empty()) return;
  try {
    // Rows go in their order either way (the same rowids): a full batch through one statement of
    // kRequestBatch rows, which spares SQLite most of its per-statement work, the rest one by one.
    if (pending_.size() == kRequestBatch) {
      SQLite::Statement& st = *insert_requests_;
      for (size_t i = 0; i < pending_.size(); ++i)
        bind_request(st, static_cast<int>(i) * request_columns_, pending_[i].first, pending_[i].second);
      st.exec();
      st.reset();
    } else {
      SQLite::Statement& st = *insert_request_;
      for (const auto& [rec, m] : pending_) {
        bind_request(st, 0, rec, m);
        st.exec();
        st.reset();
      }
    }
    pending_.clear();
  } catch (const std::exception& e) {
    pending_.clear();
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

std::string fleet_schema() {
  return "CREATE TABLE IF NOT EXISTS fleet_events (\n"
         "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
         "  time_ns INTEGER NOT NULL,\n"
         "  kind TEXT NOT NULL,\n"
         "  replica INTEGER NOT NULL,\n"
         "  request_id INTEGER,\n"
         "  value REAL NOT NULL\n"
         ");\n"
         "CREATE TABLE IF NOT EXISTS fleet_metrics (\n"
         "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
         "  name TEXT NOT NULL,\n"
         "  value REAL NOT NULL\n"
         ");\n";
}

std::string class_schema() {
  std::string cols = "run_id INTEGER NOT NULL REFERENCES runs(run_id),\n  class TEXT NOT NULL,\n  tenant TEXT NOT NULL";
  for (const auto& v : flatten(ClassSummary{})) cols += ",\n  " + v.name + (v.integer ? " INTEGER" : " REAL");
  return "CREATE TABLE IF NOT EXISTS class_stats (\n  " + cols + "\n);\n";
}

void SqliteSink::fleet_tables() {
  if (fleet_tables_) return;
  db_->exec(fleet_schema());  // within the run's transaction: the tables come with the first fleet run
  fleet_tables_ = true;
}

void SqliteSink::add_fleet_event(const core::FleetEvent& e) {
  try {
    fleet_tables();
    SQLite::Statement st(*db_, "INSERT INTO fleet_events (run_id, time_ns, kind, replica, request_id, value) "
                               "VALUES (?, ?, ?, ?, ?, ?)");
    st.bind(1, run_id_);
    st.bind(2, e.time.ns());
    st.bindNoCopy(3, core::fleet_event_name(e.kind).data());
    st.bind(4, static_cast<int64_t>(e.replica));
    if (e.kind == core::FleetEventKind::kRequestRerouted || e.kind == core::FleetEventKind::kRequestRetried ||
        e.kind == core::FleetEventKind::kLinkSpeed)
      st.bind(5, static_cast<int64_t>(e.request));
    else
      st.bind(5);
    st.bind(6, e.value);
    st.exec();
  } catch (const std::exception& e2) {
    fail("cannot write a fleet event row", e2);
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

void SqliteSink::stage(const RunSummary& summary) {
  if (staged_) return;
  flush_requests();
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
    if (!summary.fleet.empty()) {
      fleet_tables();
      SQLite::Statement fm(*db_, "INSERT INTO fleet_metrics (run_id, name, value) VALUES (?, ?, ?)");
      for (const auto& v : summary.fleet) {
        fm.bind(1, run_id_);
        fm.bind(2, v.name);
        if (v.integer) fm.bind(3, static_cast<int64_t>(v.value)); else fm.bind(3, v.value);
        fm.exec();
        fm.reset();
      }
    }
    if (!summary.classes.empty()) {
      db_->exec(class_schema());  // within the run's transaction: the table comes with the first run with classes
      db_->exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
      std::string sql = "INSERT INTO class_stats (run_id, class, tenant";
      std::string marks = "?, ?, ?";
      for (const auto& v : flatten(ClassSummary{})) {
        sql += ", " + v.name;
        marks += ", ?";
      }
      SQLite::Statement cs(*db_, sql + ") VALUES (" + marks + ")");
      for (const ClassSummary& c : summary.classes) {
        int k = 1;
        cs.bind(k++, run_id_);
        cs.bind(k++, c.name);
        cs.bind(k++, c.tenant);
        for (const auto& v : flatten(c)) {
          if (v.nullable && std::isnan(v.value))
            cs.bind(k++);
          else if (v.integer)
            cs.bind(k++, static_cast<int64_t>(v.value));
          else
            cs.bind(k++, v.value);
        }
        cs.exec();
        cs.reset();
      }
    }
    if (before_commit_) before_commit_(*db_, run_id_);
    insert_request_.reset();
    insert_sample_.reset();
    staged_ = true;
  } catch (const std::exception& e) {
    fail("cannot write the run", e);
  }
}

void SqliteSink::end_run(const RunSummary& summary) {
  stage(summary);
  try {
    core::crash_point("sqlite.before_commit");
    tx_->commit();
    tx_.reset();
    core::crash_point("sqlite.committed");
  } catch (const std::exception& e) {
    fail("cannot commit the run", e);
  }
}

}  // namespace servesim::metrics
