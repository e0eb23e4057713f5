#pragma once
// The metrics collector: observes a run's lifecycle signals, keeps the per-run aggregates, samples
// replica state on a fixed period, and forwards rows to result sinks.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/lifecycle.h"
#include "sim/core/request_class.h"
#include "sim/metrics/sink.h"
#include "sim/metrics/stats.h"
#include "sim/metrics/steady_state.h"
#include "sim/metrics/summary.h"

namespace servesim::metrics {

// What the collector needs to know of one replica's hardware (a whole TP group).
struct ReplicaHardware {
  double hbm_bandwidth = 0;    // bytes/s of the group
  double gpus = 1;             // GPUs in the group
  double usd_per_hour = 0;     // price of the group
  // Price of the replica's KV tiers (kv_tiers.host / kv_tiers.nvme usd_per_gb_hour x capacity_gb;
  // 0 = none or not priced), billed for the same hours as its GPUs.
  double kv_host_usd_per_hour = 0;
  double kv_nvme_usd_per_hour = 0;
  std::string role = "unified";  // "unified", "prefill" or "decode"
  std::string gpu;             // GPU kind, for per-replica results
};

struct CollectorConfig {
  Slo slo;
  int64_t sample_interval_ns = 0;  // replica_timeseries period; 0 = no time series
  std::vector<ReplicaHardware> replicas;
  MeasurementConfig measurement;   // the measurement window (steady_state.h); default: the arrival window
  core::RequestClasses classes;    // the workload's request classes; empty: no per-class figures
  bool retries = false;            // clients retry ([retries]): report the clients' view too
  // Priced KV tiers (docs/kv-tiers.md, "Cost"): which tiers have a usd_per_gb_hour (their
  // kv_<tier>_cost_usd rows are reported), and the shared store's price, paid once for the whole
  // run. Unpriced: cost_usd counts the GPUs only.
  bool kv_host_priced = false, kv_nvme_priced = false, kv_store_priced = false;
  double kv_store_usd_per_hour = 0;
  // How latency percentiles are kept ([output] percentiles, stats.h): auto keeps every value up to
  // exact_percentiles_max completed requests, then moves them into sketches (relative error
  // kSketchRelativeError) and frees them.
  PercentileMode percentiles = PercentileMode::kAuto;
  uint64_t exact_percentiles_max = kExactPercentilesMax;
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
  void on_decode_steps(const core::IterationRecord& base, const core::ReplicaState& state,
                       std::span<const core::DecodeStep> steps) override;
  void on_prefix_lookup(const core::PrefixLookup& l) override;
  void on_kv_transfer(const core::KvTransfer& t) override;
  void on_fleet_event(const core::FleetEvent& e) override;

  // Closes the time series at `end`, hands each sink the per-replica statistics and computes the
  // summary (the caller commits the sinks with end_run once everything else has succeeded).
  RunSummary finish(core::Time end, uint64_t events, double wall_seconds);

 private:
  void flush_samples_until(int64_t t_exclusive);
  // The measurement window and the steady-state analysis (steady_state.h) of the summary `s`.
  void finish_window(RunSummary& s, double usd_per_hour);

  CollectorConfig config_;
  std::vector<ResultSink*> sinks_;
  // Latencies of the completed requests (in the order they left: batch means) and of KV transfers.
  LatencyStore ttft_ms_{true}, tpot_ms_{true}, e2e_ms_{true}, transfer_ms_;
  bool sketched_ = false;     // every store above, per class and per client, is sketched
  bool auto_sketch_ = false;  // auto mode, not switched yet: the switch is due past exact_percentiles_max
  void to_sketch();
  std::vector<ReplicaStats> replica_stats_;
  // A replica's busy time and what its iterations did, summed in its own signal order; the run's
  // figures add the replicas' in replica order at finish() (indifferent to how replicas interleave).
  struct Busy {
    double seconds = 0, gpu_seconds = 0, peak_flop_seconds = 0, peak_bytes = 0, bytes = 0, batch_seconds = 0;
    // One iteration of `d` seconds with `batch` sequences (on_iteration and on_decode_steps alike:
    // the results' bits depend on both adding the same terms).
    void add(double d, const ReplicaHardware& hw, double batch, double iteration_peak_flop_seconds,
             double iteration_bytes) {
      seconds += d;
      gpu_seconds += d * hw.gpus;
      peak_bytes += d * hw.hbm_bandwidth;
      peak_flop_seconds += iteration_peak_flop_seconds;
      bytes += iteration_bytes;
      batch_seconds += d * batch;
    }
  };
  std::vector<Busy> replica_busy_;
  LogHistogram itl_ns_;
  int64_t gap_tokens_ = 0, gaps_ = 0;  // tokens the inter-token gaps delivered, and the gaps
  RunSummary s_;
  // Replica state, for sampling and the time-weighted KV use.
  std::vector<core::ReplicaState> state_;
  int64_t pulls_waiting_ = 0;  // over the replicas, as their last states say
  std::vector<__int128> kv_block_ns_;  // integral of blocks used over time, per replica (exact)
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
    uint64_t link_failures = 0, link_repairs = 0, link_speed_changes = 0;
    std::vector<std::optional<core::Time>> down_since;  // per replica
    long double down_ns = 0;  // replica-time spent down
    // Autoscaling: when each replica was provisioned (from the start until its first replica_off),
    // and the spans it was, per replica.
    bool elastic = false;
    uint64_t provisions = 0, drains = 0;
    uint64_t pool_provisions[2] = {0, 0};  // disaggregated: the prefill pool's, the decode pool's
    std::vector<std::optional<core::Time>> on_since;
    std::vector<std::vector<std::pair<int64_t, int64_t>>> on_spans;  // [from, to) ns
  } fleet_;
  // With client retries: each client request (its attempts together), from its first send.
  struct Clients {
    uint64_t requests = 0, retries = 0, completed = 0, gave_up = 0, meeting_slo = 0;
    LatencyStore ttft_ms, e2e_ms;  // completed, from the first send
  } clients_;
  void client_done(const core::RequestRecord& r);
  // Autoscaling: the seconds each replica was provisioned within [0, until].
  std::vector<double> provisioned_seconds(core::Time until) const;
  int64_t next_sample_ns_ = 0;
  // The requests in the system (queued + running, all replicas) and the completions over time: the
  // mean requests in the system and the steady-state analysis (steady_state.h); with a custom measurement window also one record per request, since the window is
  // only known at the end (a cool-down counted back from the last arrival, an automatic warm-up).
  LoadSeries series_;
  struct RequestSample {
    uint64_t id = 0;
    int64_t arrival_ns = 0, done_ns = 0;
    double ttft_ms = 0, tpot_ms = 0, e2e_ms = 0;  // tpot_ms NaN: one output token
    int64_t output_tokens = 0;
    bool completed = false, meets_slo = false;
  };
  std::vector<RequestSample> samples_;  // in the order requests left
  std::vector<bool> meets_;              // default window: whether each request met the SLO, in that order
  BatchSums meets_sums_;                 // the same once sketched (meets_ then freed)
  // Per request class (only with classes: a run without pays one emptiness test per request).
  struct ClassAcc {
    ClassSummary s;
    Slo slo;  // the class's limits, the run's where it has none
    LatencyStore ttft_ms, tpot_ms, e2e_ms;
  };
  std::vector<ClassAcc> classes_;
  void class_done(const core::RequestRecord& r);
  uint64_t sample_rows_ = 0;  // time-series rows made so far (bounded by kMaxSampleRows)
};

}  // namespace servesim::metrics
