#include "sim/metrics/buffer_sink.h"

#include "sim/core/error.h"

namespace servesim::metrics {

void BufferSink::begin_run(RunInfo& info) {
  reset();
  info_ = info;
}

void BufferSink::add_request(const core::RequestRecord& record, const RequestMetrics& metrics) {
  requests_.emplace_back(record, metrics);
  order_.push_back(true);
}

void BufferSink::add_sample(const ReplicaSample& sample) {
  samples_.push_back(sample);
  order_.push_back(false);
}

void BufferSink::add_replica_stats(const ReplicaStats& stats) { replica_stats_.push_back(stats); }

void BufferSink::end_run(const RunSummary& summary) {
  summary_ = summary;
  complete_ = true;
}

void BufferSink::replay(ResultSink& sink) const {
  if (!complete_) throw core::Error("internal: replaying a run that did not finish");
  RunInfo info = info_;
  sink.begin_run(info);
  size_t r = 0, s = 0;
  for (bool is_request : order_) {
    if (is_request) {
      sink.add_request(requests_[r].first, requests_[r].second);
      ++r;
    } else {
      sink.add_sample(samples_[s++]);
    }
  }
  for (const auto& e : fleet_events_) sink.add_fleet_event(e);
  for (const auto& stats : replica_stats_) sink.add_replica_stats(stats);
  sink.end_run(summary_);
}

void BufferSink::reset() {
  info_ = RunInfo{};
  summary_ = RunSummary{};
  requests_.clear();
  samples_.clear();
  replica_stats_.clear();
  fleet_events_.clear();
  order_.clear();
  complete_ = false;
}

}  // namespace servesim::metrics
