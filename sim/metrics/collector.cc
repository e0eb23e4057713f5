#include "sim/metrics/collector.h"

#include "sim/core/format.h"

#include "sim/core/error.h"

#include <algorithm>

namespace servesim::metrics {

MetricsCollector::MetricsCollector(CollectorConfig config, std::vector<ResultSink*> sinks)
    : config_(std::move(config)), sinks_(std::move(sinks)) {
  state_.resize(config_.replicas.size());
  for (size_t i = 0; i < state_.size(); ++i) state_[i].replica = static_cast<uint32_t>(i);
  kv_block_ns_.assign(config_.replicas.size(), 0);
  replica_stats_.resize(config_.replicas.size());
  replica_busy_.resize(config_.replicas.size());
  for (size_t i = 0; i < replica_stats_.size(); ++i) {
    replica_stats_[i].replica = static_cast<uint32_t>(i);
    replica_stats_[i].role = config_.replicas[i].role;
    replica_stats_[i].gpu = config_.replicas[i].gpu;
    replica_stats_[i].tensor_parallel = static_cast<int64_t>(config_.replicas[i].gpus);
  }
}

void MetricsCollector::on_prefix_lookup(const core::PrefixLookup& l) {
  s_.prefix_prompt_blocks += static_cast<uint64_t>(l.prompt_units);
  s_.prefix_matched_blocks += static_cast<uint64_t>(l.matched_units);
  s_.prefix_prompt_tokens += l.prompt_tokens;
  s_.prefix_hit_tokens += l.hit_tokens;
  s_.prefix_saved_tflop += l.saved_flops * 1e-12;
  ReplicaStats& r = replica_stats_[l.replica];
  r.prefix_prompt_blocks += static_cast<uint64_t>(l.prompt_units);
  r.prefix_matched_blocks += static_cast<uint64_t>(l.matched_units);
  r.prefix_prompt_tokens += l.prompt_tokens;
  r.prefix_hit_tokens += l.hit_tokens;
  r.prefix_saved_tflop += l.saved_flops * 1e-12;
}

void MetricsCollector::on_kv_transfer(const core::KvTransfer& t) {
  ++s_.kv_transfers;
  s_.kv_transfer_gb += t.bytes * 1e-9;
  transfer_ms_.push_back((t.end - t.start).ms());
}

void MetricsCollector::on_fleet_event(const core::FleetEvent& e) {
  fleet_.any = true;
  if (fleet_.down_since.empty()) fleet_.down_since.resize(config_.replicas.size());
  switch (e.kind) {
    case core::FleetEventKind::kReplicaDown:
      ++fleet_.failures;
      fleet_.down_since[e.replica] = e.time;
      break;
    case core::FleetEventKind::kReplicaUp:
      ++fleet_.repairs;
      if (fleet_.down_since[e.replica]) fleet_.down_ns += (e.time - *fleet_.down_since[e.replica]).ns();
      fleet_.down_since[e.replica].reset();
      break;
    case core::FleetEventKind::kReplicaSpeed:
      ++fleet_.speed_changes;
      break;
    case core::FleetEventKind::kRequestRerouted:
      ++fleet_.rerouted;
      break;
  }
  for (ResultSink* sink : sinks_) sink->add_fleet_event(e);
}

void MetricsCollector::on_arrival(uint64_t /*id*/, core::Time t) {
  window_.end = t;
  window_.completed = s_.requests_completed;
  window_.meeting_slo = s_.requests_meeting_slo;
  window_.output_tokens = s_.output_tokens;
}

void MetricsCollector::on_request_done(const core::RequestRecord& r) {
  const RequestMetrics m = request_metrics(r, config_.slo);
  ++s_.requests_total;
  switch (r.outcome) {
    case core::RequestOutcome::kCompleted:
      ++s_.requests_completed;
      ttft_ms_.push_back(m.ttft_ms);
      e2e_ms_.push_back(m.e2e_ms);
      if (m.tpot_ms) tpot_ms_.push_back(*m.tpot_ms);
      s_.prompt_tokens += r.prompt_tokens;
      s_.output_tokens += r.output_tokens;
      if (m.meets_slo) ++s_.requests_meeting_slo;
      break;
    case core::RequestOutcome::kRejectedContext:
      ++s_.requests_rejected;
      ++s_.rejected_context;
      break;
    case core::RequestOutcome::kRejectedKvCapacity:
      ++s_.requests_rejected;
      ++s_.rejected_kv_capacity;
      break;
    case core::RequestOutcome::kTimedOut:
      // A failure: no latency, no tokens delivered; it misses the SLO.
      ++s_.requests_timed_out;
      break;
    case core::RequestOutcome::kFailed:  // lost with a failed replica: it misses the SLO
      fleet_.any = true;
      ++fleet_.failed;
      break;
  }
  ++replica_stats_[r.replica].routed;
  if (r.outcome == core::RequestOutcome::kCompleted) ++replica_stats_[r.decode_replica].completed;
  for (ResultSink* sink : sinks_) sink->add_request(r, m);
}

void MetricsCollector::on_preempt(uint64_t, uint32_t replica, core::Time) {
  ++s_.preemptions;
  ++replica_stats_[replica].preemptions;
}

void MetricsCollector::on_iteration(const core::IterationRecord& it) {
  const ReplicaHardware& hw = config_.replicas[it.replica];
  const double d = it.duration.seconds();
  ++s_.iterations;
  busy_seconds_ += d;
  busy_gpu_seconds_ += d * hw.gpus;
  busy_peak_bytes_ += d * hw.hbm_bandwidth;
  peak_flop_seconds_ += it.peak_flop_seconds;
  bytes_ += it.bytes;
  batch_seconds_ += d * static_cast<double>(it.batch_size);
  ReplicaStats& r = replica_stats_[it.replica];
  ++r.iterations;
  r.prefill_tokens += it.prefill_tokens;
  r.decode_tokens += it.decode_tokens;
  Busy& b = replica_busy_[it.replica];
  b.seconds += d;
  b.gpu_seconds += d * hw.gpus;
  b.peak_bytes += d * hw.hbm_bandwidth;
  b.peak_flop_seconds += it.peak_flop_seconds;
  b.bytes += it.bytes;
}

void MetricsCollector::on_token_gaps(std::span<const core::GapRun> runs) {
  // A run goes in at once: the histogram's counts and exact integer sum are those of its gaps.
  for (const core::GapRun& run : runs) itl_ns_.add(run.gap_ns, static_cast<uint64_t>(run.count));
}

void MetricsCollector::flush_samples_until(int64_t t_exclusive) {
  if (config_.sample_interval_ns <= 0) return;
  if (next_sample_ns_ < t_exclusive) {
    // Refused before the rows are made: a time series no database or CSV file could hold.
    const double due = (static_cast<double>(t_exclusive - next_sample_ns_) / static_cast<double>(config_.sample_interval_ns) + 1) *
                       static_cast<double>(state_.size());
    if (static_cast<double>(samples_) + due > kMaxSampleRows)
      throw core::Error("the replica time series would pass " + core::format_double(kMaxSampleRows) +
                        " rows (a sample every " + core::format_double(static_cast<double>(config_.sample_interval_ns) * 1e-6) +
                        " ms of simulated time, now at " + core::format_double(static_cast<double>(t_exclusive) * 1e-9) +
                        " s, on " + std::to_string(state_.size()) +
                        " replicas); raise output.sample_interval_ms or set it to 0 for no time series");
    samples_ += static_cast<uint64_t>(due);
  }
  while (next_sample_ns_ < t_exclusive) {
    for (const auto& st : state_) {
      ReplicaSample row{st.replica, next_sample_ns_, st.queued, st.running, st.kv_blocks_used, st.kv_blocks_total};
      for (ResultSink* sink : sinks_) sink->add_sample(row);
    }
    next_sample_ns_ += config_.sample_interval_ns;
  }
}

void MetricsCollector::on_replica_state(const core::ReplicaState& s) {
  // Signals arrive in time order; a sample at time T shows the state after every signal at <= T.
  flush_samples_until(s.time.ns());
  core::ReplicaState& prev = state_[s.replica];
  kv_block_ns_[s.replica] += static_cast<long double>(prev.kv_blocks_used) * (s.time - prev.time).ns();
  in_system_ns_ += static_cast<long double>(in_system_) * (s.time - in_system_since_).ns();
  in_system_ += (s.queued + s.running) - (prev.queued + prev.running);
  in_system_since_ = s.time;
  prev = s;
}

RunSummary MetricsCollector::finish(core::Time end, uint64_t events, double wall_seconds) {
  flush_samples_until(end.ns() + 1);
  long double kv_used_ns = 0, kv_capacity_ns = 0;
  for (size_t i = 0; i < state_.size(); ++i) {
    kv_block_ns_[i] += static_cast<long double>(state_[i].kv_blocks_used) * (end - state_[i].time).ns();
    state_[i].time = end;
    kv_used_ns += kv_block_ns_[i];
    kv_capacity_ns += static_cast<long double>(state_[i].kv_blocks_total) * end.ns();
    ReplicaStats& r = replica_stats_[i];
    const Busy& b = replica_busy_[i];
    r.busy_seconds = b.seconds;
    if (b.gpu_seconds > 0) r.mfu = b.peak_flop_seconds / b.gpu_seconds;
    if (b.peak_bytes > 0) r.mbu = b.bytes / b.peak_bytes;
    const long double capacity = static_cast<long double>(state_[i].kv_blocks_total) * end.ns();
    if (capacity > 0) r.kv_util_mean = static_cast<double>(kv_block_ns_[i] / capacity);
    for (ResultSink* sink : sinks_) sink->add_replica_stats(r);
  }

  in_system_ns_ += static_cast<long double>(in_system_) * (end - in_system_since_).ns();
  in_system_since_ = end;

  RunSummary s = s_;
  s.sim_seconds = end.seconds();
  s.wall_seconds = wall_seconds;
  s.events = events;
  s.ttft_ms = summarize(ttft_ms_);
  s.tpot_ms = summarize(tpot_ms_);
  s.e2e_ms = summarize(e2e_ms_);
  s.itl_ms = itl_ns_.summarize(1e6);
  s.kv_transfer_ms = summarize(transfer_ms_);
  if (s.prefix_prompt_blocks > 0)
    s.prefix_block_hit_rate = static_cast<double>(s.prefix_matched_blocks) / static_cast<double>(s.prefix_prompt_blocks);
  if (s.prefix_prompt_tokens > 0)
    s.prefix_token_hit_rate = static_cast<double>(s.prefix_hit_tokens) / static_cast<double>(s.prefix_prompt_tokens);
  const double t = s.sim_seconds;
  if (t > 0) {
    s.throughput_req_s = static_cast<double>(s.requests_completed) / t;
    s.throughput_output_tok_s = static_cast<double>(s.output_tokens) / t;
    s.goodput_req_s = static_cast<double>(s.requests_meeting_slo) / t;
  }
  if (s.requests_total > 0)
    s.slo_attainment = static_cast<double>(s.requests_meeting_slo) / static_cast<double>(s.requests_total);
  double usd_per_hour = 0, gpus = 0;
  for (const auto& hw : config_.replicas) {
    usd_per_hour += hw.usd_per_hour;
    gpus += hw.gpus;
  }
  s.gpu_hours = gpus * t / 3600.0;
  s.cost_usd = usd_per_hour * t / 3600.0;
  if (s.output_tokens > 0) s.cost_usd_per_mtok_output = s.cost_usd / static_cast<double>(s.output_tokens) * 1e6;
  if (end.ns() > 0) s.mean_requests_in_system = static_cast<double>(in_system_ns_ / static_cast<long double>(end.ns()));
  s.arrival_window_s = window_.end.seconds();
  if (const double w = s.arrival_window_s; w > 0) {
    s.throughput_req_s_window = static_cast<double>(window_.completed) / w;
    s.throughput_output_tok_s_window = static_cast<double>(window_.output_tokens) / w;
    s.goodput_req_s_window = static_cast<double>(window_.meeting_slo) / w;
    if (window_.output_tokens > 0)
      s.cost_usd_per_mtok_output_window =
          usd_per_hour * w / 3600.0 / static_cast<double>(window_.output_tokens) * 1e6;
  }
  if (busy_gpu_seconds_ > 0) s.mfu_mean = peak_flop_seconds_ / busy_gpu_seconds_;
  if (busy_peak_bytes_ > 0) s.mbu_mean = bytes_ / busy_peak_bytes_;
  if (busy_seconds_ > 0) s.mean_batch_size = batch_seconds_ / busy_seconds_;
  if (kv_capacity_ns > 0) s.kv_util_mean = static_cast<double>(kv_used_ns / kv_capacity_ns);
  if (fleet_.any) {
    long double down_ns = fleet_.down_ns;
    for (const auto& since : fleet_.down_since)
      if (since) down_ns += (end - *since).ns();
    auto count = [](const char* name, uint64_t v) { return NamedValue{name, static_cast<double>(v), true}; };
    s.fleet = {count("replica_failures", fleet_.failures),
               count("replica_repairs", fleet_.repairs),
               count("replica_speed_changes", fleet_.speed_changes),
               count("requests_rerouted", fleet_.rerouted),
               count("requests_failed", fleet_.failed),
               NamedValue{"replica_down_seconds", static_cast<double>(down_ns * 1e-9L), false}};
  }
  return s;
}

}  // namespace servesim::metrics
