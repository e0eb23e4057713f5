#pragma once
// The results database of an experiment: the run tables SqliteSink writes (runs, requests,
// replica_timeseries) plus three tables that tie runs to the experiment's points:
//
//   experiment      (key TEXT PRIMARY KEY, value TEXT): identity, kind ("sweep" or "capacity"), name,
//                   points (how many the sweep expands to), source (the experiment file's text)
//   points          (point_index INTEGER PRIMARY KEY, point_key TEXT UNIQUE, run_id UNIQUE, seed, label,
//                   configuration: the label without the seed and the arrival rate)
//   point_settings  (point_index, position, key, value): the point's axis values as TOML text
//
// A point's run has run_id = point_index + 1, and a point is committed in the same transaction as
// its run, so a database killed at any moment holds whole points only and a re-run can skip them.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "experiments/experiment.h"
#include "sim/metrics/buffer_sink.h"
#include "sim/metrics/sqlite_sink.h"

namespace servesim::experiments {

struct ExperimentRecord {
  std::string identity;   // Experiment::identity() (or the capacity search's)
  std::string kind;       // "sweep" or "capacity"
  std::string name;
  int64_t points = 0;     // points the sweep expands to (0 when not known in advance)
  std::string source;     // the experiment file's text
};

// What a point's run reports, read back from the runs table or taken from a fresh run.
struct RunFigures {
  int64_t run_id = 0;
  uint64_t requests_total = 0;
  uint64_t requests_meeting_slo = 0;
  int64_t output_tokens = 0;
  double sim_seconds = 0;
  double slo_attainment = 0;
  double goodput_req_s = 0;
  double throughput_req_s = 0;
  double throughput_output_tok_s = 0;
  double gpu_hours = 0;
  double cost_usd = 0;
  double cost_usd_per_mtok_output = 0;
  double ttft_ms_p90 = 0;
  double tpot_ms_p90 = 0;
  double offered_req_s = 0;   // (requests - 1) / (last arrival - first arrival)
  // The measurement window and the steady state (sim/metrics/steady_state.h), for capacity searches.
  uint64_t window_requests = 0;
  double slo_attainment_window = 0;
  double arrival_window_s = 0;
  double goodput_req_s_window = 0;
  double throughput_output_tok_s_window = 0;
  double throughput_output_tok_s_window_ci95 = 0;  // NaN: unknown
  double cost_usd_per_mtok_output_window = 0;
  double ttft_ms_window_p90 = 0, tpot_ms_window_p90 = 0;
  bool stationary = true;
  bool settled = false;
  double in_system_trend_req_s = 0;
};

RunFigures figures_of(const metrics::BufferSink& run);

class ResultsDb {
 public:
  // Opens or creates `path` for `experiment`. Refuses (core::Error naming the file) a database that
  // holds another experiment, or runs that are not points of one (written by servesim run).
  ResultsDb(const std::string& path, const ExperimentRecord& experiment);
  ~ResultsDb();

  const std::string& path() const { return path_; }
  // Committed points: point key -> point index.
  const std::map<std::string, int64_t>& done() const { return done_; }
  int64_t next_point_index() const;

  // Writes the point and its run in one transaction (run_id = point_index + 1).
  void commit(const Point& point, const metrics::BufferSink& run);
  RunFigures figures(int64_t point_index) const;
  // Stores (replaces) one row of the experiment table beside the identity: a search's answer
  // (capacity_result), which servesim report draws.
  void put_experiment_value(const std::string& key, const std::string& value);
  // The open connection (merging attaches the inputs to it).
  SQLite::Database& database() { return sink_->database(); }

 private:
  std::string path_;
  std::unique_ptr<metrics::SqliteSink> sink_;
  std::map<std::string, int64_t> done_;
};

// Reads the experiment table of a results database (opened read-only); nullopt-like empty identity
// when the file has none.
ExperimentRecord read_experiment(const std::string& path);

// The sweep tables' CREATE statements.
std::string experiment_schema();

struct MergeStats {
  int64_t inputs = 0;
  int64_t points_added = 0;
  int64_t points_already = 0;   // present in OUT or in an earlier input
  int64_t points_total = 0;     // OUT's points after the merge
  int64_t points_expected = 0;  // the experiment's (0 when not known, as for capacity searches)
};

// Merges shard databases into `out` (created when missing): idempotent; refuses inputs of another
// experiment, of another table layout, or that contradict OUT (the same point with another key).
MergeStats merge_databases(const std::string& out, const std::vector<std::string>& inputs);

}  // namespace servesim::experiments
