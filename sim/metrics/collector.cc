#include "sim/metrics/collector.h"

#include "sim/core/format.h"

#include "sim/core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::metrics {
namespace {

// The 95% half-width of the mean of `sequence` by batch means; NaN when it is shorter than the batches.
double batch_half_width(std::span<const double> sequence, size_t batches) {
  return t_interval(batch_means(sequence, batches)).half_width;
}

}  // namespace

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
  for (const core::RequestClass& rc : config_.classes) {
    ClassAcc c;
    c.s.name = rc.name;
    c.s.tenant = rc.tenant;
    c.s.priority = rc.priority;
    c.slo = config_.slo;
    if (rc.ttft_slo_ms) c.slo.ttft_ms = rc.ttft_slo_ms;
    if (rc.tpot_slo_ms) c.slo.tpot_ms = rc.tpot_slo_ms;
    c.s.ttft_slo_ms = c.slo.ttft_ms ? *c.slo.ttft_ms : std::numeric_limits<double>::quiet_NaN();
    c.s.tpot_slo_ms = c.slo.tpot_ms ? *c.slo.tpot_ms : std::numeric_limits<double>::quiet_NaN();
    classes_.push_back(std::move(c));
  }
  if (config_.percentiles == PercentileMode::kSketch) to_sketch();
  auto_sketch_ = config_.percentiles == PercentileMode::kAuto;
}

void MetricsCollector::to_sketch() {
  sketched_ = true;
  auto_sketch_ = false;
  for (LatencyStore* store : {&ttft_ms_, &tpot_ms_, &e2e_ms_, &transfer_ms_, &clients_.ttft_ms, &clients_.e2e_ms})
    store->to_sketch();
  for (ClassAcc& c : classes_)
    for (LatencyStore* store : {&c.ttft_ms, &c.tpot_ms, &c.e2e_ms}) store->to_sketch();
  for (bool m : meets_) meets_sums_.add(m ? 1.0 : 0.0);
  std::vector<bool>().swap(meets_);
}

void MetricsCollector::on_prefix_lookup(const core::PrefixLookup& l) {
  if (l.reload) [[unlikely]] {  // an admission again after a recompute preemption or a failover
    ++s_.prefix_reloads;
    s_.prefix_reload_hit_tokens += l.hit_tokens;
    s_.prefix_host_reload_tokens += l.host_hit_tokens;
    s_.prefix_store_reload_tokens += l.store_hit_tokens;
    s_.prefix_nvme_reload_tokens += l.nvme_hit_tokens;
    return;
  }
  s_.prefix_prompt_blocks += static_cast<uint64_t>(l.prompt_units);
  s_.prefix_matched_blocks += static_cast<uint64_t>(l.matched_units);
  s_.prefix_prompt_tokens += l.prompt_tokens;
  s_.prefix_hit_tokens += l.hit_tokens;
  s_.prefix_saved_tflop += l.saved_flops * 1e-12;
  s_.prefix_host_hit_tokens += l.host_hit_tokens;
  s_.prefix_store_hit_tokens += l.store_hit_tokens;
  s_.prefix_nvme_hit_tokens += l.nvme_hit_tokens;
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
  transfer_ms_.add((t.end - t.start).ms());
  if (t.start > t.ready) {
    ++s_.pull_waits;
    s_.pull_wait_s += (t.start - t.ready).seconds();
    s_.pull_wait_max_ms = std::max(s_.pull_wait_max_ms, (t.start - t.ready).ms());
  }
}

void MetricsCollector::on_fleet_event(const core::FleetEvent& e) {
  fleet_.any = fleet_.any || e.kind != core::FleetEventKind::kRequestRetried;  // retries alone: no fault figures
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
    case core::FleetEventKind::kRequestRetried:
      break;  // counted by the attempts' records (client_done)
    case core::FleetEventKind::kReplicaProvision:
    case core::FleetEventKind::kReplicaReady:
    case core::FleetEventKind::kReplicaDrain:
    case core::FleetEventKind::kReplicaOff:
      if (!fleet_.elastic) {  // every replica built counts as provisioned from the start until it goes off
        fleet_.elastic = true;
        fleet_.on_since.assign(config_.replicas.size(), core::Time());
        fleet_.on_spans.resize(config_.replicas.size());
      }
      if (e.kind == core::FleetEventKind::kReplicaProvision) {
        ++fleet_.provisions;
        if (const std::string& role = config_.replicas[e.replica].role; role != "unified")
          ++fleet_.pool_provisions[role == "prefill" ? 0 : 1];
        fleet_.on_since[e.replica] = e.time;
      } else if (e.kind == core::FleetEventKind::kReplicaDrain) {
        ++fleet_.drains;
      } else if (e.kind == core::FleetEventKind::kReplicaOff && fleet_.on_since[e.replica]) {
        fleet_.on_spans[e.replica].emplace_back(fleet_.on_since[e.replica]->ns(), e.time.ns());
        fleet_.on_since[e.replica].reset();
      }
      break;
    case core::FleetEventKind::kLinkDown:
      ++fleet_.link_failures;
      break;
    case core::FleetEventKind::kLinkUp:
      ++fleet_.link_repairs;
      break;
    case core::FleetEventKind::kLinkSpeed:
      ++fleet_.link_speed_changes;
      break;
  }
  for (ResultSink* sink : sinks_) sink->add_fleet_event(e);
}

std::vector<double> MetricsCollector::provisioned_seconds(core::Time until) const {
  std::vector<double> out(fleet_.on_spans.size(), 0.0);
  const int64_t u = until.ns();
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t ns = 0;
    auto add = [&](int64_t from, int64_t to) { ns += std::max<int64_t>(0, std::min(to, u) - from); };
    for (const auto& [from, to] : fleet_.on_spans[i]) add(from, to);
    if (fleet_.on_since[i]) add(fleet_.on_since[i]->ns(), u);
    out[i] = static_cast<double>(ns) * 1e-9;
  }
  return out;
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
      ttft_ms_.add(m.ttft_ms);
      e2e_ms_.add(m.e2e_ms);
      if (m.tpot_ms) tpot_ms_.add(*m.tpot_ms);
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
    case core::RequestOutcome::kRejectedAdmission:  // shed at the router: it misses the SLO
      ++s_.requests_rejected;
      ++s_.rejected_admission;
      break;
  }
  if (!classes_.empty()) class_done(r);
  if (config_.retries) client_done(r);
  ++replica_stats_[r.replica].routed;
  const bool completed = r.outcome == core::RequestOutcome::kCompleted;
  if (completed) ++replica_stats_[r.decode_replica].completed;
  // A request leaves when its last iteration ends, a rejected one at its arrival, a timed-out one
  // when the engine lets go of it: its finish in every case, now.
  const core::Time left = r.finish;
  series_.done(left.ns(), m.meets_slo, completed ? r.output_tokens : 0);
  if (!config_.measurement.custom()) {
    if (!sketched_) [[likely]]
      meets_.push_back(m.meets_slo);
    else
      meets_sums_.add(m.meets_slo ? 1.0 : 0.0);
  } else {
    samples_.push_back({r.id, r.arrival.ns(), left.ns(), m.ttft_ms,
                        m.tpot_ms ? *m.tpot_ms : std::numeric_limits<double>::quiet_NaN(), m.e2e_ms,
                        r.output_tokens, completed, m.meets_slo});
  }
  // Past auto's size every exact value goes into the sketches (after this request's, so that the
  // stores switch together).
  if (auto_sketch_ && s_.requests_completed > config_.exact_percentiles_max) [[unlikely]]
    to_sketch();
  for (ResultSink* sink : sinks_) sink->add_request(r, m);
}

void MetricsCollector::client_done(const core::RequestRecord& r) {
  if (r.attempt == 0) ++clients_.requests; else ++clients_.retries;
  if (r.retried) return;  // the client tries again: not its last word
  if (r.outcome != core::RequestOutcome::kCompleted) {
    ++clients_.gave_up;
    return;
  }
  // As the client's user sees it: from the first send, through every failed attempt and back-off.
  core::RequestRecord seen = r;
  if (r.attempt > 0) seen.arrival = r.first_sent;
  const RequestMetrics m = request_metrics(seen, config_.slo);
  ++clients_.completed;
  if (m.meets_slo) ++clients_.meeting_slo;
  clients_.ttft_ms.add(m.ttft_ms);
  clients_.e2e_ms.add(m.e2e_ms);
}

void MetricsCollector::class_done(const core::RequestRecord& r) {
  if (r.request_class >= classes_.size())
    throw core::Error("internal: request " + std::to_string(r.id) + " of class " + std::to_string(r.request_class) +
                      " but the workload has " + std::to_string(classes_.size()) + " classes");
  ClassAcc& c = classes_[r.request_class];
  const RequestMetrics m = request_metrics(r, c.slo);
  ++c.s.requests;
  switch (r.outcome) {
    case core::RequestOutcome::kCompleted:
      ++c.s.completed;
      c.ttft_ms.add(m.ttft_ms);
      c.e2e_ms.add(m.e2e_ms);
      if (m.tpot_ms) c.tpot_ms.add(*m.tpot_ms);
      c.s.output_tokens += r.output_tokens;
      if (m.meets_slo) ++c.s.meeting_slo;
      break;
    case core::RequestOutcome::kRejectedAdmission:
      ++c.s.rejected_admission;
      ++c.s.rejected;
      break;
    case core::RequestOutcome::kRejectedContext:
    case core::RequestOutcome::kRejectedKvCapacity: ++c.s.rejected; break;
    case core::RequestOutcome::kTimedOut: ++c.s.timed_out; break;
    case core::RequestOutcome::kFailed: ++c.s.failed; break;
  }
}

void MetricsCollector::on_preempt(uint64_t, uint32_t replica, core::Time) {
  ++s_.preemptions;
  ++replica_stats_[replica].preemptions;
}

void MetricsCollector::on_iteration(const core::IterationRecord& it) {
  const ReplicaHardware& hw = config_.replicas[it.replica];
  const double d = it.duration.seconds();
  ++s_.iterations;
  ReplicaStats& r = replica_stats_[it.replica];
  ++r.iterations;
  r.prefill_tokens += it.prefill_tokens;
  r.decode_tokens += it.decode_tokens;
  if (it.draft_tokens > 0) [[unlikely]] {  // speculative decoding (tokens beyond one per decode need drafts)
    r.decode_tokens += it.extra_decode_tokens;
    r.spec_draft_tokens += it.draft_tokens;
    r.spec_accepted_tokens += it.accepted_tokens;
    s_.spec_verify_steps += static_cast<uint64_t>(it.verify_seqs);
    s_.spec_draft_tokens += it.draft_tokens;
    s_.spec_accepted_tokens += it.accepted_tokens;
  }
  replica_busy_[it.replica].add(d, hw, static_cast<double>(it.batch_size), it.peak_flop_seconds, it.bytes);
}

void MetricsCollector::on_token_gaps(std::span<const core::GapRun> runs) {
  // A run goes in at once: the histogram's counts and exact integer sum are those of its gaps. A gap
  // that delivers several tokens (speculative decoding) is one ITL sample, as a client streaming
  // chunks records it.
  for (const core::GapRun& run : runs) {
    itl_ns_.add(run.gap_ns, static_cast<uint64_t>(run.count));
    gaps_ += run.count;
    gap_tokens_ += run.count * run.tokens;
  }
}

void MetricsCollector::on_decode_steps(const core::IterationRecord& base, const core::ReplicaState& state,
                                       std::span<const core::DecodeStep> steps) {
  // What on_iteration, on_replica_state and on_token_gaps do for each step (LifecycleObserver's
  // order), the replica's sums held in registers: the same additions in the same order, so the same
  // bits. The integer counts are added once.
  if (base.draft_tokens > 0 || base.prefill_tokens != 0) [[unlikely]] {
    core::LifecycleObserver::on_decode_steps(base, state, steps);
    return;
  }
  const ReplicaHardware& hw = config_.replicas[base.replica];
  const auto batch = static_cast<double>(base.batch_size);
  Busy b = replica_busy_[base.replica];
  core::ReplicaState st = state;
  core::ReplicaState& prev = state_[base.replica];
  // A state that differs from the last one in its time and blocks alone (as a run's always do:
  // Replica::decode_window) changes neither level nor the pulls: on_replica_state would flush the
  // samples due, add the blocks' time and keep the state, which is all it does here.
  const bool blocks_only = st.queued == prev.queued && st.running == prev.running &&
                           st.pulls_waiting == prev.pulls_waiting && st.kv_blocks_total == prev.kv_blocks_total;
  __int128& kv_block_ns = kv_block_ns_[base.replica];
  uint64_t emitting = 0;
  for (const core::DecodeStep& step : steps) {
    b.add(step.duration.seconds(), hw, batch, step.peak_flop_seconds, step.bytes);
    if (step.kv_blocks_used >= 0) {
      if (blocks_only) [[likely]] {
        const int64_t t = step.start.ns();
        if (next_sample_ns_ < t && config_.sample_interval_ns > 0) flush_samples_until(t);
        kv_block_ns += static_cast<__int128>(prev.kv_blocks_used) * (t - prev.time.ns());
        prev.time = step.start;
        prev.kv_blocks_used = step.kv_blocks_used;
      } else {
        st.time = step.start;
        st.kv_blocks_used = step.kv_blocks_used;
        on_replica_state(st);
      }
    }
    if (step.emits) {
      itl_ns_.add(step.duration.ns(), static_cast<uint64_t>(base.decode_tokens));
      ++emitting;
    }
  }
  replica_busy_[base.replica] = b;
  const auto n = static_cast<uint64_t>(steps.size());
  s_.iterations += n;
  ReplicaStats& r = replica_stats_[base.replica];
  r.iterations += n;
  r.decode_tokens += base.decode_tokens * static_cast<int64_t>(n);
  gaps_ += base.decode_tokens * static_cast<int64_t>(emitting);
  gap_tokens_ += base.decode_tokens * static_cast<int64_t>(emitting);
}

void MetricsCollector::flush_samples_until(int64_t t_exclusive) {
  if (config_.sample_interval_ns <= 0) return;
  if (next_sample_ns_ < t_exclusive) {
    // Refused before the rows are made: a time series no database or CSV file could hold.
    const double due = (static_cast<double>(t_exclusive - next_sample_ns_) / static_cast<double>(config_.sample_interval_ns) + 1) *
                       static_cast<double>(state_.size());
    if (static_cast<double>(sample_rows_) + due > kMaxSampleRows)
      throw core::Error("the replica time series would pass " + core::format_double(kMaxSampleRows) +
                        " rows (a sample every " + core::format_double(static_cast<double>(config_.sample_interval_ns) * 1e-6) +
                        " ms of simulated time, now at " + core::format_double(static_cast<double>(t_exclusive) * 1e-9) +
                        " s, on " + std::to_string(state_.size()) +
                        " replicas); raise output.sample_interval_ms or set it to 0 for no time series");
    sample_rows_ += static_cast<uint64_t>(due);
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
  if (s.pulls_waiting != prev.pulls_waiting) [[unlikely]] {
    pulls_waiting_ += s.pulls_waiting - prev.pulls_waiting;
    s_.pulls_waiting_peak = std::max<uint64_t>(s_.pulls_waiting_peak, static_cast<uint64_t>(pulls_waiting_));
  }
  kv_block_ns_[s.replica] += static_cast<__int128>(prev.kv_blocks_used) * (s.time - prev.time).ns();
  // A signal that changes neither level leaves the series alone: the series' integrals are exact
  // (integer ns x level, closed into bins by the next change, completion or finish at the same
  // values), so a zero-delta call carried nothing; and replica signals may arrive out of global
  // order across replicas (docs/architecture.md, "The order of replica signals"), which the series
  // (time order) cannot take.
  const int64_t delta = (s.queued + s.running) - (prev.queued + prev.running);
  const int64_t queued_delta = s.queued - prev.queued;
  if (delta != 0 || queued_delta != 0) series_.add_level(s.time.ns(), delta, queued_delta);
  prev = s;
}

RunSummary MetricsCollector::finish(core::Time end, uint64_t events, double wall_seconds) {
  flush_samples_until(end.ns() + 1);
  series_.finish(end.ns());
  long double kv_used_ns = 0, kv_capacity_ns = 0;
  for (size_t i = 0; i < state_.size(); ++i) {
    kv_block_ns_[i] += static_cast<__int128>(state_[i].kv_blocks_used) * (end - state_[i].time).ns();
    state_[i].time = end;
    // (An exact integer, where a long double sum was used until 2026-12-02: the same value while
    // it fits 64 bits, as in every run here, and no x87 arithmetic on every state signal.)
    const auto kv_ns = static_cast<long double>(kv_block_ns_[i]);
    kv_used_ns += kv_ns;
    kv_capacity_ns += static_cast<long double>(state_[i].kv_blocks_total) * end.ns();
    ReplicaStats& r = replica_stats_[i];
    const Busy& b = replica_busy_[i];
    r.busy_seconds = b.seconds;
    if (b.gpu_seconds > 0) r.mfu = b.peak_flop_seconds / b.gpu_seconds;
    if (b.peak_bytes > 0) r.mbu = b.bytes / b.peak_bytes;
    const long double capacity = static_cast<long double>(state_[i].kv_blocks_total) * end.ns();
    if (capacity > 0) r.kv_util_mean = static_cast<double>(kv_ns / capacity);
    for (ResultSink* sink : sinks_) sink->add_replica_stats(r);
  }


  RunSummary s = s_;
  s.sim_seconds = end.seconds();
  s.wall_seconds = wall_seconds;
  s.events = events;
  // Batch means of the latencies in the order requests finished, before summarize() sorts them: the
  // default measurement window holds every request.
  const size_t batches = static_cast<size_t>(config_.measurement.batches);
  if (!config_.measurement.custom()) {
    auto half_width = [&](const LatencyStore& v) { return t_interval(v.batch_means(batches)).half_width; };
    s.steady.ttft_ms_mean_ci95 = half_width(ttft_ms_);
    s.steady.tpot_ms_mean_ci95 = half_width(tpot_ms_);
    s.steady.e2e_ms_mean_ci95 = half_width(e2e_ms_);
    if (!sketched_) {
      std::vector<double> meets(meets_.begin(), meets_.end());
      s.steady.slo_attainment_ci95 = batch_half_width(meets, batches);
    } else {
      s.steady.slo_attainment_ci95 = t_interval(meets_sums_.batch_means(batches)).half_width;
    }
  }
  s.ttft_ms = ttft_ms_.summarize();
  s.tpot_ms = tpot_ms_.summarize();
  s.e2e_ms = e2e_ms_.summarize();
  s.itl_ms = itl_ns_.summarize(1e6);
  s.kv_transfer_ms = transfer_ms_.summarize();
  if (sketched_) {
    s.percentiles = "sketch";
    s.percentile_relative_error = kSketchRelativeError;
  }
  if (s.spec_draft_tokens > 0)
    s.spec_acceptance_rate = static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_draft_tokens);
  if (s.spec_verify_steps > 0)
    s.spec_mean_accepted_length =
        1.0 + static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_verify_steps);
  if (gaps_ > 0) s.tokens_per_gap = static_cast<double>(gap_tokens_) / static_cast<double>(gaps_);
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
  for (ClassAcc& c : classes_) {
    c.s.ttft_ms = c.ttft_ms.summarize();
    c.s.tpot_ms = c.tpot_ms.summarize();
    c.s.e2e_ms = c.e2e_ms.summarize();
    if (t > 0) {
      c.s.throughput_req_s = static_cast<double>(c.s.completed) / t;
      c.s.goodput_req_s = static_cast<double>(c.s.meeting_slo) / t;
    }
    if (c.s.requests > 0) c.s.slo_attainment = static_cast<double>(c.s.meeting_slo) / static_cast<double>(c.s.requests);
    s.classes.push_back(c.s);
  }
  double usd_per_hour = 0, gpus = 0;
  for (const auto& hw : config_.replicas) {
    usd_per_hour += hw.usd_per_hour;
    gpus += hw.gpus;
  }
  s.gpu_hours = gpus * t / 3600.0;
  s.cost_usd = usd_per_hour * t / 3600.0;
  // Autoscaled: the GPU time actually provisioned (starting, up or draining), replica by replica;
  // the window's and the steady state's costs take the run's mean provisioned rate.
  std::vector<double> provisioned;
  if (fleet_.elastic) {
    provisioned = provisioned_seconds(end);
    double gpu_s = 0, usd_s = 0;
    for (size_t i = 0; i < provisioned.size(); ++i) {
      gpu_s += config_.replicas[i].gpus * provisioned[i];
      usd_s += config_.replicas[i].usd_per_hour * provisioned[i];
    }
    s.gpu_hours = gpu_s / 3600.0;
    s.cost_usd = usd_s / 3600.0;
    usd_per_hour = t > 0 ? usd_s / t : 0;
  }
  // Priced KV tiers: a replica's host and NVMe tiers for the hours its GPUs are billed (the run,
  // or its provisioned time when autoscaled), the shared store for the whole run; added to the
  // cost and to the rate the window's cost takes.
  std::vector<NamedValue> kv_cost_rows;
  if (config_.kv_host_priced || config_.kv_nvme_priced || config_.kv_store_priced) {
    double host_usd_s = 0, nvme_usd_s = 0;
    for (size_t i = 0; i < config_.replicas.size(); ++i) {
      const double seconds = fleet_.elastic ? provisioned[i] : t;
      host_usd_s += config_.replicas[i].kv_host_usd_per_hour * seconds;
      nvme_usd_s += config_.replicas[i].kv_nvme_usd_per_hour * seconds;
    }
    const double host_usd = host_usd_s / 3600.0, nvme_usd = nvme_usd_s / 3600.0;
    const double store_usd = config_.kv_store_usd_per_hour * t / 3600.0;
    s.cost_usd += host_usd + nvme_usd + store_usd;
    if (t > 0) usd_per_hour += (host_usd_s + nvme_usd_s) / t + config_.kv_store_usd_per_hour;
    if (config_.kv_host_priced) kv_cost_rows.push_back(NamedValue{"kv_host_cost_usd", host_usd, false});
    if (config_.kv_nvme_priced) kv_cost_rows.push_back(NamedValue{"kv_nvme_cost_usd", nvme_usd, false});
    if (config_.kv_store_priced) kv_cost_rows.push_back(NamedValue{"kv_store_cost_usd", store_usd, false});
  }
  if (s.output_tokens > 0) s.cost_usd_per_mtok_output = s.cost_usd / static_cast<double>(s.output_tokens) * 1e6;
  if (end.ns() > 0)
    s.mean_requests_in_system = static_cast<double>(series_.integral_ns(end.ns()) / static_cast<long double>(end.ns()));
  s.arrival_window_s = window_.end.seconds();
  if (const double w = s.arrival_window_s; w > 0) {
    s.throughput_req_s_window = static_cast<double>(window_.completed) / w;
    s.throughput_output_tok_s_window = static_cast<double>(window_.output_tokens) / w;
    s.goodput_req_s_window = static_cast<double>(window_.meeting_slo) / w;
    if (window_.output_tokens > 0)
      s.cost_usd_per_mtok_output_window =
          usd_per_hour * w / 3600.0 / static_cast<double>(window_.output_tokens) * 1e6;
  }
  finish_window(s, usd_per_hour);
  // The run's busy figures: each replica's own sums (in its own signal order), added in replica
  // order, so that they do not depend on how different replicas' iterations interleaved (replicas
  // may run ahead of the global clock, docs/architecture.md, "The order of replica signals"). One replica: its sums.
  Busy all;
  for (const Busy& b : replica_busy_) {
    all.seconds += b.seconds;
    all.gpu_seconds += b.gpu_seconds;
    all.peak_bytes += b.peak_bytes;
    all.peak_flop_seconds += b.peak_flop_seconds;
    all.bytes += b.bytes;
    all.batch_seconds += b.batch_seconds;
  }
  if (all.gpu_seconds > 0) s.mfu_mean = all.peak_flop_seconds / all.gpu_seconds;
  if (all.peak_bytes > 0) s.mbu_mean = all.bytes / all.peak_bytes;
  if (all.seconds > 0) s.mean_batch_size = all.batch_seconds / all.seconds;
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
    if (fleet_.elastic) {
      // The most replicas provisioned at once: a sweep over the spans (an end before a start at the
      // same time, so that the replicas off from the start never count).
      std::vector<std::pair<int64_t, int>> steps;
      for (size_t i = 0; i < fleet_.on_spans.size(); ++i) {
        for (const auto& [from, to] : fleet_.on_spans[i]) {
          steps.emplace_back(from, +1);
          steps.emplace_back(to, -1);
        }
        if (fleet_.on_since[i]) steps.emplace_back(fleet_.on_since[i]->ns(), +1);
      }
      std::sort(steps.begin(), steps.end());
      int peak = 0, now = 0;
      for (const auto& st : steps) peak = std::max(peak, now += st.second);
      double replica_s = 0;
      for (double v : provisioned) replica_s += v;
      s.fleet.push_back(count("replica_provisions", fleet_.provisions));
      s.fleet.push_back(count("replica_drains", fleet_.drains));
      s.fleet.push_back(count("replicas_peak", static_cast<uint64_t>(peak)));
      s.fleet.push_back(NamedValue{"replicas_mean", t > 0 ? replica_s / t : 0, false});
      s.fleet.push_back(NamedValue{"provisioned_replica_hours", replica_s / 3600.0, false});
      s.fleet.push_back(NamedValue{"provisioned_gpu_hours", s.gpu_hours, false});
      // Disaggregated: each pool's share (a pool has one GPU type), whether it is autoscaled or fixed.
      for (const char* role : {"prefill", "decode"}) {
        double pool_replica_s = 0, pool_gpu_s = 0;
        bool any = false;
        for (size_t i = 0; i < provisioned.size(); ++i)
          if (config_.replicas[i].role == role) {
            any = true;
            pool_replica_s += provisioned[i];
            pool_gpu_s += config_.replicas[i].gpus * provisioned[i];
          }
        if (!any) continue;
        const std::string pool(role);
        s.fleet.push_back(count((pool + "_replica_provisions").c_str(), fleet_.pool_provisions[pool == "prefill" ? 0 : 1]));
        s.fleet.push_back(NamedValue{pool + "_replicas_mean", t > 0 ? pool_replica_s / t : 0, false});
        s.fleet.push_back(NamedValue{pool + "_provisioned_gpu_hours", pool_gpu_s / 3600.0, false});
      }
    }
    if (fleet_.link_failures > 0) {
      s.fleet.push_back(count("link_failures", fleet_.link_failures));
      s.fleet.push_back(count("link_repairs", fleet_.link_repairs));
    }
    if (fleet_.link_speed_changes > 0) s.fleet.push_back(count("link_speed_changes", fleet_.link_speed_changes));
  }
  for (NamedValue& v : kv_cost_rows) s.fleet.push_back(std::move(v));
  if (config_.retries) {
    auto count = [](const char* name, uint64_t v) { return NamedValue{name, static_cast<double>(v), true}; };
    auto real = [](const char* name, double v) { return NamedValue{name, v, false}; };
    const double n = static_cast<double>(clients_.requests);
    const LatencyStats ttft = clients_.ttft_ms.summarize();
    const LatencyStats e2e = clients_.e2e_ms.summarize();
    // Unknown (NULL) when no client request completed.
    auto latency = [&](const char* name, double v) {
      return clients_.completed > 0 ? NamedValue{name, v, false}
                                    : NamedValue{name, std::numeric_limits<double>::quiet_NaN(), false, true};
    };
    for (const NamedValue& v :
         {count("client_requests", clients_.requests), count("retry_attempts", clients_.retries),
          real("retry_amplification", n > 0 ? (n + static_cast<double>(clients_.retries)) / n : 0),
          count("client_completed", clients_.completed), count("client_gave_up", clients_.gave_up),
          real("client_success_rate", n > 0 ? static_cast<double>(clients_.completed) / n : 0),
          real("client_slo_attainment", n > 0 ? static_cast<double>(clients_.meeting_slo) / n : 0),
          latency("client_ttft_ms_p50", ttft.p50), latency("client_ttft_ms_p99", ttft.p99),
          latency("client_e2e_ms_p50", e2e.p50), latency("client_e2e_ms_p99", e2e.p99)})
      s.fleet.push_back(v);
  }
  return s;
}

}  // namespace servesim::metrics

namespace servesim::metrics {

void MetricsCollector::finish_window(RunSummary& s, double usd_per_hour) {
  const MeasurementConfig& mc = config_.measurement;
  SteadyState& st = s.steady;
  const size_t batches = static_cast<size_t>(mc.batches);
  st.batches = mc.batches;
  const int64_t last_arrival = window_.end.ns();
  int64_t mser_ns = 0;
  if (!mc.custom()) {
    // The arrival window [0, last arrival]: every request, and the rates computed above.
    st.window_requests = s.requests_total;
    st.ttft_ms = s.ttft_ms;
    st.tpot_ms = s.tpot_ms;
    st.e2e_ms = s.e2e_ms;
    st.slo_attainment = s.slo_attainment;
    const Truncation t = mser5_warmup(series_, last_arrival, &mser_ns);
    st.mser_warmup_s = static_cast<double>(mser_ns) * 1e-9;
    st.mser_at_limit = t.at_limit;
    analyse_series(series_, {0, last_arrival, static_cast<double>(s.requests_total)}, mser_ns, batches, st);
    st.settled = st.settled && s.arrival_window_s >= kSettleSpans * st.e2e_ms.p99 / 1000;
    return;
  }

  // A custom window: the arrivals [a, b] (by id, in arrival order) and the times [t0, t1].
  const size_t total = samples_.size();
  if (total == 0) return;
  std::vector<int64_t> arrival(total);
  for (const RequestSample& r : samples_) arrival[r.id] = r.arrival_ns;
  auto fail = [](const std::string& why) {
    throw core::Error("[measurement]: " + why + "; shorten the warm-up or cool-down, or run more requests");
  };
  uint64_t b = total - 1;
  int64_t t1 = last_arrival;
  if (mc.cooldown_requests) {
    if (static_cast<uint64_t>(*mc.cooldown_requests) >= total)
      fail("cooldown_requests = " + std::to_string(*mc.cooldown_requests) + " leaves none of the run's " +
           std::to_string(total) + " requests");
    b = total - 1 - static_cast<uint64_t>(*mc.cooldown_requests);
    t1 = arrival[b];
  } else if (mc.cooldown_s) {
    t1 = last_arrival - std::llround(*mc.cooldown_s * 1e9);
    const auto it = std::upper_bound(arrival.begin(), arrival.end(), t1);
    if (it == arrival.begin())
      fail("cooldown_s = " + core::format_double(*mc.cooldown_s) + " starts the cool-down before the first arrival");
    b = static_cast<uint64_t>(it - arrival.begin()) - 1;
  }
  const Truncation tr = mser5_warmup(series_, t1, &mser_ns);
  st.mser_warmup_s = static_cast<double>(mser_ns) * 1e-9;
  st.mser_at_limit = tr.at_limit;
  uint64_t a = 0;
  int64_t t0 = 0;
  if (mc.warmup_requests) {
    a = static_cast<uint64_t>(*mc.warmup_requests);
    if (a > b)
      fail("warmup_requests = " + std::to_string(a) + " leaves no request before the cool-down (request " +
           std::to_string(b) + ")");
    t0 = arrival[a];
  } else {
    if (mc.warmup_s) t0 = std::llround(*mc.warmup_s * 1e9);
    if (mc.auto_warmup) t0 = mser_ns;
    a = static_cast<uint64_t>(std::lower_bound(arrival.begin(), arrival.end(), t0) - arrival.begin());
  }
  if (a > b || t1 <= t0)
    fail("the measurement window is empty: the warm-up ends at " + core::format_double(static_cast<double>(t0) * 1e-9) +
         " s and the cool-down starts at " + core::format_double(static_cast<double>(t1) * 1e-9) + " s");

  // Latency and attainment of the requests that arrived in the window, in the order they left.
  std::vector<double> ttft, tpot, e2e, meets;
  uint64_t meeting = 0, members = 0;
  double done_in = 0, meeting_in = 0, tokens_in = 0;
  for (const RequestSample& r : samples_) {
    if (r.done_ns >= t0 && r.done_ns <= t1 && r.completed) {
      done_in += 1;
      tokens_in += static_cast<double>(r.output_tokens);
      if (r.meets_slo) meeting_in += 1;
    }
    if (r.id < a || r.id > b) continue;
    ++members;
    meets.push_back(r.meets_slo ? 1.0 : 0.0);
    if (!r.completed) continue;
    if (r.meets_slo) ++meeting;
    ttft.push_back(r.ttft_ms);
    e2e.push_back(r.e2e_ms);
    if (!std::isnan(r.tpot_ms)) tpot.push_back(r.tpot_ms);
  }
  st.window_start_s = static_cast<double>(t0) * 1e-9;
  st.window_requests = members;
  st.ttft_ms_mean_ci95 = batch_half_width(ttft, batches);
  st.tpot_ms_mean_ci95 = batch_half_width(tpot, batches);
  st.e2e_ms_mean_ci95 = batch_half_width(e2e, batches);
  st.slo_attainment_ci95 = batch_half_width(meets, batches);
  st.ttft_ms = summarize(ttft);
  st.tpot_ms = summarize(tpot);
  st.e2e_ms = summarize(e2e);
  st.slo_attainment = members ? static_cast<double>(meeting) / static_cast<double>(members) : 0;

  // The rates: what left in [t0, t1], per second of it.
  const double w = static_cast<double>(t1 - t0) * 1e-9;
  s.arrival_window_s = w;
  s.throughput_req_s_window = done_in / w;
  s.throughput_output_tok_s_window = tokens_in / w;
  s.goodput_req_s_window = meeting_in / w;
  s.cost_usd_per_mtok_output_window = tokens_in > 0 ? usd_per_hour * w / 3600.0 / tokens_in * 1e6 : 0;
  analyse_series(series_, {t0, t1, static_cast<double>(members)}, std::max(t0, mser_ns), batches, st);
  st.settled = st.settled && w >= kSettleSpans * st.e2e_ms.p99 / 1000;
}

}  // namespace servesim::metrics
