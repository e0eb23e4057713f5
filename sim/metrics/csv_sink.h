#pragma once
// Results as CSV files in a directory: runs.csv, requests.csv, replica_timeseries.csv and
// replica_stats.csv, with the columns of the SQLite tables; and, like the database's tables of the
// same names, fleet_events.csv and fleet_metrics.csv (created with the first run that has fleet
// dynamics: faults, retries, autoscaling) and class_stats.csv (with the first run with request
// classes). Rows of earlier runs already in the files
// are kept; requests.csv holds a run's requests in request-id (arrival) order.
//
// Safe under concurrency and failure: a run's rows are staged in private files while it runs; at the
// end, under an exclusive lock on the directory (flock), the sink numbers the run after those in
// runs.csv (or takes the database's number), writes each file whole to a temporary file and renames
// it over the old one, runs.csv last. Processes writing one directory take turns for that short
// moment, so none repeats a run id or loses another's rows; a failure (a full disk) leaves every file
// as it was. A run is visible when runs.csv names it: rows of a run that runs.csv does not name (a
// process killed between two renames) are dropped at the next write.

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "sim/core/output_file.h"
#include "sim/metrics/sink.h"

namespace servesim::metrics {

class CsvSink final : public ResultSink {
 public:
  // Creates `dir` if needed; throws core::Error naming the path when it cannot.
  explicit CsvSink(std::string dir);
  ~CsvSink() override;

  // A run_id of 0 is chosen when the run is staged (after the runs already in runs.csv); another
  // number (the database's) is used as given, and refused if runs.csv already holds it.
  void begin_run(RunInfo& info) override;
  void add_request(const core::RequestRecord& record, const RequestMetrics& metrics) override;
  void add_sample(const ReplicaSample& sample) override;
  void add_fleet_event(const core::FleetEvent& event) override;
  void add_replica_stats(const ReplicaStats& stats) override;
  void stage(const RunSummary& summary) override;
  void end_run(const RunSummary& summary) override;

  // The run's number in the CSV files (known once staged).
  int64_t run_id() const { return info_.run_id; }

  // The files the sink writes, for output-collision checks.
  static const std::vector<std::string>& file_names();

 private:
  struct Table {
    std::string name;    // file name
    std::string header;  // first line, without newline
    std::string staged;  // path of this run's rows (without the run_id column), written as they come
    std::ofstream out;
    std::unique_ptr<core::AtomicFile> next;  // the new file, staged
  };
  void open_table(Table& t, const std::string& name, const std::string& header);
  void write_request(const std::string& row);
  // A table written only by runs that have its rows (fleet_events, fleet_metrics, class_stats): its
  // next content when this run has rows or the file exists (earlier runs' rows kept), else nothing.
  void stage_optional(Table& t, const std::string& rows, const std::set<int64_t>& ids);

  std::string dir_;
  RunInfo info_;
  Table requests_, samples_, replica_stats_, runs_;
  Table fleet_events_, fleet_metrics_, class_stats_;
  std::string fleet_event_rows_;  // this run's fleet events (few: failures, repairs, scaling, retries)
  // Requests finish out of order: each waits here until every earlier id has been written.
  std::map<uint64_t, std::string> pending_requests_;
  uint64_t next_request_ = 0;
  std::unique_ptr<core::DirectoryLock> lock_;
  bool open_ = false, staged_ = false;
};

// CSV field quoting (RFC 4180): quotes fields holding commas, quotes or line breaks.
std::string csv_field(const std::string& s);

}  // namespace servesim::metrics
