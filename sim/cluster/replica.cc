#include "sim/cluster/replica.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/error.h"

namespace servesim::sim {

Replica::Replica(const ReplicaConfig& config, Simulation& sim, RequestTable& requests,
                 const hwmodels::StepCostModel& cost, std::unique_ptr<BatchScheduler> scheduler,
                 core::LifecycleObserver& observer, ReplicaLoad& load)
    : index_(config.index),
      max_context_(config.max_context),
      sim_(sim),
      requests_(requests),
      cost_(cost),
      scheduler_(std::move(scheduler)),
      observer_(observer),
      load_(load),
      kv_(config.kv_blocks, config.block_size) {
  load_ = ReplicaLoad{};
  load_.kv_blocks_total = kv_.total();
}

std::optional<core::RequestOutcome> Replica::rejection(const Request& r) const {
  if (r.prompt_tokens + r.output_tokens > max_context_) return core::RequestOutcome::kRejectedContext;
  if (kv_.blocks_for(r.peak_kv_tokens()) > kv_.total() - scheduler_->reserved_blocks(kv_))
    return core::RequestOutcome::kRejectedKvCapacity;
  return std::nullopt;
}

void Replica::enqueue(RequestId id) {
  Request& r = requests_[id];
  r.replica = index_;
  r.state = RequestState::kWaiting;
  waiting_.push_back(id);
  load_.outstanding_tokens += r.outstanding_tokens();
  if (busy_) {
    load_.queued = static_cast<int64_t>(waiting_.size());
    publish_state();
    return;
  }
  try_start_iteration();
}

bool Replica::admit_front(int64_t kv_tokens) {
  const RequestId id = waiting_.front();
  Request& r = requests_[id];
  const int64_t need = kv_.blocks_for(kv_tokens) - r.kv_blocks;
  if (need > 0 && !kv_.try_allocate(need)) return false;
  if (need > 0) r.kv_blocks += need;
  waiting_.pop_front();
  r.state = RequestState::kRunning;
  // Keep the running set in arrival order (the FCFS priority); a readmitted preempted request is
  // older than most of the set, a new one is the newest.
  auto pos = std::upper_bound(running_.begin(), running_.end(), r.id,
                              [this](uint64_t rid, RequestId other) { return rid < requests_[other].id; });
  running_.insert(pos, id);
  return true;
}

bool Replica::reserve(RequestId id, int64_t kv_tokens) {
  Request& r = requests_[id];
  const int64_t need = kv_.blocks_for(kv_tokens) - r.kv_blocks;
  if (need <= 0) return true;
  if (!kv_.try_allocate(need)) return false;
  r.kv_blocks += need;
  return true;
}

void Replica::preempt(RequestId id) {
  Request& r = requests_[id];
  auto it = std::find(running_.begin(), running_.end(), id);
  if (it == running_.end()) throw core::Error("internal: preempting a request that is not running");
  running_.erase(it);
  const int64_t before = r.outstanding_tokens();
  kv_.release(r.kv_blocks);
  r.kv_blocks = 0;
  r.kv_tokens = 0;
  load_.outstanding_tokens += r.outstanding_tokens() - before;
  r.state = RequestState::kWaiting;
  ++r.preemptions;
  waiting_.push_front(id);
  observer_.on_preempt(r.id, index_, sim_.now());
}

void Replica::try_start_iteration() {
  if (busy_) return;
  if (waiting_.empty() && running_.empty()) {
    publish_state();
    return;
  }
  plan_.clear();
  scheduler_->plan(*this, plan_);
  if (plan_.empty()) {
    // With nothing running, every waiting request fits alone (rejection() saw to that), so a
    // policy that schedules nothing would stall the replica forever: a bug, not a state.
    if (running_.empty())
      throw core::Error("internal: scheduler planned nothing on replica " + std::to_string(index_) +
                        " with " + std::to_string(waiting_.size()) + " requests waiting and none running");
    publish_state();
    return;
  }

  hwmodels::BatchShape shape;
  for (const auto& p : plan_.prefills) {
    const Request& r = requests_[p.id];
    const int64_t c = p.tokens, prior = r.kv_tokens;
    shape.prefill_seqs += 1;
    shape.prefill_tokens += c;
    shape.prefill_context_tokens += prior;
    shape.prefill_attention_pairs += c * prior + c * (c + 1) / 2;
    if (prior + c == r.prefill_target()) shape.prefill_logits += 1;
  }
  for (RequestId id : plan_.decodes) {
    shape.decode_seqs += 1;
    shape.decode_context_tokens += requests_[id].kv_tokens + 1;
  }
  const hwmodels::StepCost cost = cost_.step(shape);
  if (!(cost.seconds > 0) || !std::isfinite(cost.seconds))
    throw core::Error("internal: cost model returned a non-positive iteration time");
  const core::Duration duration =
      core::Duration::from_ns(std::max<int64_t>(1, std::llround(cost.seconds * 1e9)));

  busy_ = true;
  sim_.schedule_after(duration, this, ++iteration_);
  core::IterationRecord rec;
  rec.replica = index_;
  rec.start = sim_.now();
  rec.duration = duration;
  rec.prefill_tokens = shape.prefill_tokens;
  rec.decode_tokens = shape.decode_seqs;
  rec.batch_size = shape.prefill_seqs + shape.decode_seqs;
  rec.flops = cost.flops;
  rec.bytes = cost.bytes;
  observer_.on_iteration(rec);
  publish_state();
}

void Replica::emit_token(Request& r, core::Time now) {
  if (r.generated == 0) {
    r.first_token = now;
  } else {
    gaps_.push_back((now - r.last_token).ns());
  }
  r.last_token = now;
  ++r.generated;
}

void Replica::on_event(uint64_t /*payload*/) {
  busy_ = false;
  const core::Time now = sim_.now();
  gaps_.clear();
  int64_t outstanding_delta = 0;
  for (const auto& p : plan_.prefills) {
    Request& r = requests_[p.id];
    const int64_t before = r.outstanding_tokens();
    r.kv_tokens += p.tokens;
    if (r.kv_tokens == r.prefill_target()) emit_token(r, now);
    outstanding_delta += r.outstanding_tokens() - before;
  }
  for (RequestId id : plan_.decodes) {
    Request& r = requests_[id];
    r.kv_tokens += 1;
    emit_token(r, now);
  }
  outstanding_delta -= static_cast<int64_t>(plan_.decodes.size());
  load_.outstanding_tokens += outstanding_delta;

  // Finished requests leave the running set (order of the rest is kept).
  size_t kept = 0;
  for (RequestId id : running_) {
    Request& r = requests_[id];
    if (r.generated < r.output_tokens) {
      running_[kept++] = id;
      continue;
    }
    kv_.release(r.kv_blocks);
    r.kv_blocks = 0;
    core::RequestRecord rec;
    rec.id = r.id;
    rec.replica = index_;
    rec.outcome = core::RequestOutcome::kCompleted;
    rec.prompt_tokens = r.prompt_tokens;
    rec.output_tokens = r.output_tokens;
    rec.arrival = r.arrival;
    rec.first_token = r.first_token;
    rec.finish = now;
    rec.preemptions = r.preemptions;
    observer_.on_request_done(rec);
    requests_.erase(id);
  }
  running_.resize(kept);
  if (!gaps_.empty()) observer_.on_token_gaps(gaps_);
  plan_.clear();
  try_start_iteration();
}

void Replica::publish_state() {
  load_.queued = static_cast<int64_t>(waiting_.size());
  load_.running = static_cast<int64_t>(running_.size());
  load_.kv_blocks_used = kv_.used();
  core::ReplicaState s;
  s.replica = index_;
  s.time = sim_.now();
  s.queued = load_.queued;
  s.running = load_.running;
  s.kv_blocks_used = kv_.used();
  s.kv_blocks_total = kv_.total();
  observer_.on_replica_state(s);
}

}  // namespace servesim::sim
