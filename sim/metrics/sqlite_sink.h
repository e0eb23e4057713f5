#pragma once
// Results in SQLite: tables `runs` (one row per run), `requests` (one row per request),
// `replica_timeseries` (sampled replica state) and `replica_stats` (one row per replica). Each run is written inside one transaction, so a
// run's rows appear whole or not at all, whatever happens to the process.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/metrics/sink.h"

namespace SQLite {
class Database;
class Statement;
class Transaction;
}  // namespace SQLite

namespace servesim::metrics {

// Ownership: servesim marks its databases (PRAGMA application_id = kApplicationId) and writes only
// into a new or empty file, one it marked, or one an earlier version wrote (a `runs` table of this
// layout and nothing foreign, marked on its next write). Anything else (a file that is not SQLite,
// another program's database) is refused before anything is written.
inline constexpr int kApplicationId = 0x73727673;  // "srvs"

// The optional tables of fleet dynamics (fleet_events, fleet_metrics), CREATE IF NOT EXISTS.
std::string fleet_schema();
// The optional table of request classes (class_stats), CREATE IF NOT EXISTS.
std::string class_schema();

class SqliteSink final : public ResultSink {
 public:
  // Opens or creates `path` and its tables; throws core::Error naming the path when it cannot,
  // when the file is not servesim's, or when it holds tables of an incompatible layout.
  explicit SqliteSink(const std::string& path);
  ~SqliteSink() override;

  void begin_run(RunInfo& info) override;
  void add_request(const core::RequestRecord& record, const RequestMetrics& metrics) override;
  void add_sample(const ReplicaSample& sample) override;
  void add_replica_stats(const ReplicaStats& stats) override;
  // Fleet dynamics go to tables fleet_events and fleet_metrics, created with the first run that has
  // any (runs without fleet dynamics leave the database's layout as it was).
  void add_fleet_event(const core::FleetEvent& event) override;
  // Writes the summary and runs the before-commit hook inside the run's transaction.
  void stage(const RunSummary& summary) override;
  // Commits the run's transaction.
  void end_run(const RunSummary& summary) override;

  // Runs inside each run's transaction just before it commits: sweeps record the point there, so
  // that a point and its run appear together or not at all.
  using CommitHook = std::function<void(SQLite::Database& db, int64_t run_id)>;
  void set_before_commit(CommitHook hook) { before_commit_ = std::move(hook); }
  // The open connection (sweeps keep their own tables in the same file).
  SQLite::Database& database() { return *db_; }

 private:
  [[noreturn]] void fail(const std::string& what, const std::exception& e) const;

  std::string path_;
  std::unique_ptr<SQLite::Database> db_;
  std::unique_ptr<SQLite::Transaction> tx_;
  bool fleet_tables_ = false;  // created in this run's transaction (or before)
  std::vector<std::string> class_names_;  // this run's request classes (empty: no class column written)
  void fleet_tables();
  // Request rows wait in pending_ until kRequestBatch of them go in through one multi-row
  // statement (the rest one by one when the run is staged).
  static constexpr size_t kRequestBatch = 32;
  void bind_request(SQLite::Statement& st, int base, const core::RequestRecord& r, const RequestMetrics& m) const;
  void flush_requests();
  std::unique_ptr<SQLite::Statement> insert_request_;
  std::unique_ptr<SQLite::Statement> insert_requests_;
  std::vector<std::pair<core::RequestRecord, RequestMetrics>> pending_;
  int request_columns_ = 20;
  std::unique_ptr<SQLite::Statement> insert_sample_;
  int64_t run_id_ = 0;
  bool staged_ = false;
  CommitHook before_commit_;
};

// The CREATE statements of the three tables (also used by tests and docs).
std::string sqlite_schema();

// Refuses (core::Error naming the path) a file at `path` that servesim must not write its tables
// into: not SQLite, or SQLite with tables of another program. `role` names the file ("--db").
// Nothing is written. A missing or empty file passes.
void check_results_database(const std::string& path);

}  // namespace servesim::metrics
