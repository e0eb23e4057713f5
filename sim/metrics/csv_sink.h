#pragma once
// Results as CSV files in a directory: runs.csv, requests.csv, replica_timeseries.csv and
// replica_stats.csv, with the
// columns of the SQLite tables. Rows of earlier runs already in the files are kept; the new run's
// rows are added when the run ends, each file replaced atomically (write a temporary, rename).

#include <fstream>
#include <string>

#include "sim/metrics/sink.h"

namespace servesim::metrics {

class CsvSink final : public ResultSink {
 public:
  // Creates `dir` if needed; throws core::Error naming the path when it cannot.
  explicit CsvSink(std::string dir);
  ~CsvSink() override;

  void begin_run(RunInfo& info) override;
  void add_request(const core::RequestRecord& record, const RequestMetrics& metrics) override;
  void add_sample(const ReplicaSample& sample) override;
  void add_replica_stats(const ReplicaStats& stats) override;
  void end_run(const RunSummary& summary) override;

 private:
  struct Table {
    std::string name;    // file name
    std::string header;  // first line, without newline
    std::string staged;  // path of this run's rows, written as they come
    std::ofstream out;
  };
  void open_table(Table& t, const std::string& name, const std::string& header);
  void publish(Table& t, const std::string& extra_rows);

  std::string dir_;
  RunInfo info_;
  Table requests_, samples_, replica_stats_;
  bool open_ = false;
};

// CSV field quoting (RFC 4180): quotes fields holding commas, quotes or line breaks.
std::string csv_field(const std::string& s);

}  // namespace servesim::metrics
