#pragma once
// The metrics collector: observes a run's lifecycle signals, keeps the per-run aggregates, samples
// replica state on a fixed period, and forwards rows to result sinks.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/lifecycle.h"
#include "sim/metrics/sink.h"
#include "sim/metrics/stats.h"
#include "sim/metrics/summary.h"

namespace servesim::metrics {

// What the collector needs to know of one replica's hardware (a whole TP group).
struct ReplicaHardware {
  double hbm_bandwidth = 0;    // bytes/s of the group
  double gpus = 1;             // GPUs in the group
  double usd_per_hour = 0;     // price of the group
  std::string role = "unified";  // "unified", "prefill" or "decode"
  std::string gpu;             // GPU kind, for per-replica results
};

struct CollectorConfig {
  Slo slo;
  int64_t sample_interval_ns = 0;  // replica_timeseries period; 0 = no time series
  std::vector<ReplicaHardware> replicas;
};

// The most replica time-series rows one run makes.
inline constexpr double kMaxSampleRows = 1e8;

class MetricsCollector final : public core::LifecycleObserver {
 public:
  MetricsCollector(CollectorConfig config, std::vector<ResultSink*> sinks);

  void on_arrival(uint64_t id, core::Time t) override;
  void on_request_done(const core::RequestRecord& r) override;
  void on_preempt(uint64_t id, uint32_t replica, core::Time t) override;
  void on_iteration(const core::IterationRecord& it) override;
  void on_token_gaps(std::span<const core::GapRun> runs) override;
  void on_replica_state(const core::ReplicaState& s) override;
  void on_prefix_lookup(const core::PrefixLookup& l) override;
  void on_kv_transfer(const core::KvTransfer& t) override;
  void on_fleet_event(const core::FleetEvent& e) override;

  // Closes the time series at `end`, hands each sink the per-replica statistics and computes the
  // summary (the caller commits the sinks with end_run once everything else has succeeded).
  RunSummary finish(core::Time end, uint64_t events, double wall_seconds);

 private:
  void flush_samples_until(int64_t t_exclusive);

  CollectorConfig config_;
  std::vector<ResultSink*> sinks_;
  std::vector<double> ttft_ms_, tpot_ms_, e2e_ms_, transfer_ms_;
  std::vector<ReplicaStats> replica_stats_;
  struct Busy {
    double seconds = 0, gpu_seconds = 0, peak_flop_seconds = 0, peak_bytes = 0, bytes = 0;
  };
  std::vector<Busy> replica_busy_;
  LogHistogram itl_ns_;
  RunSummary s_;
  double busy_seconds_ = 0, busy_gpu_seconds_ = 0, busy_peak_bytes_ = 0;
  double peak_flop_seconds_ = 0, bytes_ = 0, batch_seconds_ = 0;
  // Replica state, for sampling and the time-weighted KV use.
  std::vector<core::ReplicaState> state_;
  std::vector<long double> kv_block_ns_;  // integral of blocks used over time, per replica
  long double in_system_ns_ = 0;          // integral of queued + running over time, all replicas
  int64_t in_system_ = 0;                 // queued + running now, all replicas
  core::Time in_system_since_;
  // The arrival window: the last arrival, and what had completed by then.
  struct WindowCounts {
    core::Time end;
    uint64_t completed = 0, meeting_slo = 0;
    int64_t output_tokens = 0;
  } window_;
  // Fleet dynamics.
  struct Fleet {
    bool any = false;
    uint64_t failures = 0, repairs = 0, speed_changes = 0, rerouted = 0, failed = 0;
    std::vector<std::optional<core::Time>> down_since;  // per replica
    long double down_ns = 0;  // replica-time spent down
  } fleet_;
  int64_t next_sample_ns_ = 0;
  uint64_t samples_ = 0;  // time-series rows made so far (bounded by kMaxSampleRows)
};

}  // namespace servesim::metrics
