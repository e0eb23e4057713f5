#pragma once
// A sink that keeps one run's rows in memory and replays them, in the order they arrived, into
// another sink. Sweeps run points on several threads into BufferSinks and write them to the one
// results database in point order, so the database does not depend on the thread count.
// Memory: one RequestRecord + RequestMetrics per request (128 bytes) and one ReplicaSample per
// time-series row (48 bytes).

#include <exception>
#include <utility>
#include <vector>

#include "sim/metrics/sink.h"

namespace servesim::metrics {

class BufferSink final : public ResultSink {
 public:
  void begin_run(RunInfo& info) override;
  void add_request(const core::RequestRecord& record, const RequestMetrics& metrics) override;
  void add_sample(const ReplicaSample& sample) override;
  void add_replica_stats(const ReplicaStats& stats) override;
  void add_fleet_event(const core::FleetEvent& event) override { fleet_events_.push_back(event); }
  void end_run(const RunSummary& summary) override;

  // True once end_run has been called (the run finished cleanly).
  bool complete() const { return complete_; }
  const RunInfo& info() const { return info_; }
  const RunSummary& summary() const { return summary_; }
  size_t requests() const { return requests_.size(); }
  size_t samples() const { return samples_.size(); }
  const std::vector<std::pair<core::RequestRecord, RequestMetrics>>& request_rows() const { return requests_; }

  // Replays the run into `sink` (begin_run with the same run_id, every row, end_run). Throws
  // core::Error unless the run is complete.
  void replay(ResultSink& sink) const;
  // Forgets the run (info, summary, rows) but keeps the rows' memory for the next one: a sweep
  // reuses its buffers from point to point.
  void reset();

 private:
  RunInfo info_;
  RunSummary summary_;
  std::vector<std::pair<core::RequestRecord, RequestMetrics>> requests_;
  std::vector<ReplicaSample> samples_;
  std::vector<ReplicaStats> replica_stats_;
  std::vector<core::FleetEvent> fleet_events_;
  // Rows in arrival order across both kinds: true = next request, false = next sample.
  std::vector<bool> order_;
  bool complete_ = false;
};

}  // namespace servesim::metrics
