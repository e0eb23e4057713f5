// Autoscaling, the mechanism (sim/cluster/autoscaling.h; docs/fleet.md "Autoscaling"): part of
// sim::Cluster, kept apart from the arrival path. The policy says how many replicas it wants; this
// file decides when (evaluation interval, stabilisation window, cooldown) and which replicas change
// phase, and tells the observers (core::FleetEvent: replica_provision, replica_ready, replica_drain,
// replica_off, each with the replicas provisioned after it).
#include <algorithm>
#include <string>

#include "sim/cluster/cluster.h"
#include "sim/core/error.h"

namespace servesim::sim {

void Cluster::set_autoscaler(std::unique_ptr<Autoscaler> policy, const AutoscalePlan& plan, ReplicaRole role) {
  if (!policy) return;
  // The pool's replicas: all of a unified cluster's, or one pool of a disaggregated one.
  size_t first = 0, size = layout_.replicas;
  if (disaggregated() != (role != ReplicaRole::kUnified))
    throw core::Error("internal: an autoscaler's pool does not match the cluster's layout");
  if (role == ReplicaRole::kPrefill) size = layout_.prefill_replicas;
  if (role == ReplicaRole::kDecode) {
    first = layout_.prefill_replicas;
    size = layout_.replicas - first;
  }
  for (const auto& p : scale_pools_)
    if (p->first == first) throw core::Error("internal: a pool with two autoscalers");
  if (plan.max_replicas != size || plan.min_replicas < 1 || plan.min_replicas > plan.max_replicas ||
      plan.initial < plan.min_replicas || plan.initial > plan.max_replicas || plan.interval.ns() <= 0 ||
      plan.cold_start.ns() < 0 || plan.stabilization.ns() < 0 || plan.cooldown.ns() < 0)
    throw core::Error("internal: an autoscaling plan out of range");
  auto pool = std::make_unique<ScalePool>();
  pool->first = static_cast<uint32_t>(first);
  pool->policy = std::move(policy);
  pool->plan = plan;
  pool->timer.cluster = this;
  pool->timer.pool = static_cast<uint32_t>(scale_pools_.size());
  scale_pools_.push_back(std::move(pool));
  autoscaler_ = true;
}

void Cluster::start_autoscaling() {
  phases_.assign(replicas_.size(), ReplicaPhase::kUp);
  phase_generation_.assign(replicas_.size(), 0);
  ready_at_.assign(replicas_.size(), core::Time());
  pushes_to_.assign(replicas_.size(), 0);
  provisioned_ = static_cast<uint32_t>(replicas_.size());
  // Pools in replica order (prefill before decode), whatever order they were set in.
  std::sort(scale_pools_.begin(), scale_pools_.end(), [](const auto& a, const auto& b) { return a->first < b->first; });
  for (uint32_t k = 0; k < scale_pools_.size(); ++k) scale_pools_[k]->timer.pool = k;
  for (auto& pool : scale_pools_) {
    std::vector<Replica*> mine;
    for (uint32_t i = pool->first; i < pool->end(); ++i) mine.push_back(replicas_[i].get());
    pool->policy->bind(mine);
    for (uint32_t i = pool->first + pool->plan.initial; i < pool->end(); ++i)
      set_phase(i, ReplicaPhase::kOff, core::FleetEventKind::kReplicaOff);
    // The initial count was wanted from the start: no scale-down before a whole window has passed.
    pool->wanted.emplace_back(sim_.now(), pool->plan.initial);
    sim_.schedule_weak_at(sim_.now() + pool->plan.interval, &pool->timer, 0);
  }
}

void Cluster::set_phase(uint32_t i, ReplicaPhase phase, core::FleetEventKind kind) {
  const bool was_provisioned = phases_[i] != ReplicaPhase::kOff;
  const bool provisioned = phase != ReplicaPhase::kOff;
  provisioned_ = provisioned_ + (provisioned ? 1u : 0u) - (was_provisioned ? 1u : 0u);
  phases_[i] = phase;
  loads_[i].up = phase == ReplicaPhase::kUp;
  fleet_event(kind, i, 0, static_cast<double>(provisioned_));
}

void Cluster::on_scale_timer(uint32_t pool_index, uint64_t payload) {
  if (payload == 0) {
    ScalePool& pool = *scale_pools_[pool_index];
    evaluate_autoscaler(pool);
    // Evaluations at whole multiples of the interval from the start (no drift); weak, so they end
    // with the run.
    ++pool.evaluations;
    int64_t next = 0;
    if (!__builtin_mul_overflow(static_cast<int64_t>(pool.evaluations + 1), pool.plan.interval.ns(), &next))
      sim_.schedule_weak_at(core::Time::from_ns(next), &pool.timer, 0);
    return;
  }
  const uint32_t i = static_cast<uint32_t>((payload & 0xffffffffu) - 1);
  const uint32_t generation = static_cast<uint32_t>(payload >> 32);
  // Stale: the start was called off (and perhaps the replica provisioned again since).
  if (phases_[i] != ReplicaPhase::kStarting || phase_generation_[i] != generation) return;
  set_phase(i, ReplicaPhase::kUp, core::FleetEventKind::kReplicaReady);
  came_up(i);
}

void Cluster::came_up(uint32_t i) {
  // Requests parked while failures left no replica up go to it (disaggregated: no prefill replica;
  // prefilled requests waiting on their prefill replica for a decode replica).
  if (!parked_.empty()) unpark();
  if (!decode_waiting_.empty() && i >= layout_.prefill_replicas) wake_decode_waiting();
}

const Cluster::ScalePool* Cluster::scale_pool_at(size_t first) const {
  for (const auto& p : scale_pools_)
    if (p->first == first) return p.get();
  return nullptr;
}

std::optional<core::Time> Cluster::next_scale_up(size_t first) const {
  // [faults] with an autoscaler: the pool starting at replica `first` (a unified cluster's only
  // pool, or the prefill or decode pool of a disaggregated one); none when it is not autoscaled.
  const ScalePool* pool = scale_pool_at(first);
  if (!pool) return std::nullopt;
  std::optional<core::Time> soonest;
  bool provisionable = false;
  for (uint32_t i = pool->first; i < pool->end(); ++i) {
    if (phases_[i] == ReplicaPhase::kStarting && (!soonest || ready_at_[i] < *soonest)) soonest = ready_at_[i];
    provisionable = provisionable || (phases_[i] == ReplicaPhase::kOff && !replicas_[i]->down());
  }
  if (soonest || !provisionable) return soonest;
  // The next evaluation (whole multiples of the interval from the start) can provision it.
  int64_t next = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(pool->evaluations + 1), pool->plan.interval.ns(), &next))
    return std::nullopt;
  return core::Time::from_ns(next);
}

void Cluster::evaluate_autoscaler(ScalePool& pool) {
  const AutoscalePlan& plan = pool.plan;
  // A draining replica whose last request left without a departure signal (its client gave up on
  // the way) is empty by now.
  for (uint32_t i = pool.first; i < pool.end(); ++i)
    if (phases_[i] == ReplicaPhase::kDraining) switch_off_if_empty(i);
  FleetView view;
  view.now = sim_.now();
  view.loads = std::span<const ReplicaLoad>(loads_).subspan(pool.first, plan.max_replicas);
  view.phases = std::span<const ReplicaPhase>(phases_).subspan(pool.first, plan.max_replicas);
  for (ReplicaPhase p : view.phases) {
    view.current += p == ReplicaPhase::kStarting || p == ReplicaPhase::kUp;
    view.up += p == ReplicaPhase::kUp;
  }
  view.arrived = counters_.arrived;
  const int64_t raw = pool.policy->desired(view);
  const uint32_t wanted = static_cast<uint32_t>(std::clamp<int64_t>(raw, plan.min_replicas, plan.max_replicas));
  // The stabilisation window: the counts wanted over [now - window, now].
  pool.wanted.emplace_back(sim_.now(), wanted);
  while (!pool.wanted.empty() && pool.wanted.front().first + plan.stabilization < sim_.now()) pool.wanted.pop_front();
  uint32_t target = wanted;
  if (wanted < view.current) {
    // Scale down only as far as the highest count wanted over the whole window (Kubernetes HPA's
    // downscale stabilisation).
    for (const auto& w : pool.wanted) target = std::max(target, w.second);
    target = std::min(target, view.current);
  }
  if (target == view.current) return;
  if (pool.last_scaling && sim_.now() < *pool.last_scaling + plan.cooldown) return;
  pool.last_scaling = sim_.now();
  scale_to(pool, target);
}

void Cluster::scale_to(ScalePool& pool, uint32_t target) {
  const uint32_t first = pool.first, n = pool.end();
  uint32_t current = 0;
  for (uint32_t i = first; i < n; ++i)
    current += phases_[i] == ReplicaPhase::kStarting || phases_[i] == ReplicaPhase::kUp;
  while (current < target) {
    // A draining replica is still loaded and warm: calling its drain off is immediate.
    uint32_t pick = n;
    for (uint32_t i = first; i < n && pick == n; ++i)
      if (phases_[i] == ReplicaPhase::kDraining) pick = i;
    if (pick < n) {
      set_phase(pick, ReplicaPhase::kUp, core::FleetEventKind::kReplicaReady);
      came_up(pick);
    } else {
      // A failed replica ([faults]) cannot be provisioned until its repair.
      for (uint32_t i = first; i < n && pick == n; ++i)
        if (phases_[i] == ReplicaPhase::kOff && !replicas_[i]->down()) pick = i;
      if (pick == n) return;  // every replica is in service or down
      ++phase_generation_[pick];
      set_phase(pick, ReplicaPhase::kStarting, core::FleetEventKind::kReplicaProvision);
      const uint64_t payload = (uint64_t{phase_generation_[pick]} << 32) | (pick + 1u);
      ready_at_[pick] = sim_.now() + pool.plan.cold_start;
      sim_.schedule_weak_at(ready_at_[pick], &scale_timer_, payload);
    }
    ++current;
  }
  while (current > target) {
    // The newest start is called off first (it serves nothing yet), then the highest-numbered
    // replica up drains. target >= min_replicas >= 1 keeps one replica up.
    uint32_t pick = n;
    for (uint32_t i = n; i-- > first && pick == n;)
      if (phases_[i] == ReplicaPhase::kStarting) pick = i;
    if (pick < n) {
      set_phase(pick, ReplicaPhase::kOff, core::FleetEventKind::kReplicaOff);
    } else {
      for (uint32_t i = n; i-- > first && pick == n;)
        if (phases_[i] == ReplicaPhase::kUp) pick = i;
      if (pick == n) throw core::Error("internal: autoscaling found no replica to drain");
      set_phase(pick, ReplicaPhase::kDraining, core::FleetEventKind::kReplicaDrain);
      switch_off_if_empty(pick);
    }
    --current;
  }
}

void Cluster::switch_off_if_empty(uint32_t i) {
  if (phases_[i] != ReplicaPhase::kDraining) return;
  const ReplicaLoad& l = loads_[i];
  // Empty: nothing on the way to it (queued counts requests still on the client path, and on a
  // decode replica the pulls waiting for it and under way), waiting, running or in an iteration; a
  // prefill replica also holds each prefilled request's KV until its transfer has ended (idle()).
  if (l.queued != 0 || l.running != 0 || !replicas_[i]->idle() || pushes_to_[i] != 0) return;
  set_phase(i, ReplicaPhase::kOff, core::FleetEventKind::kReplicaOff);
}

}  // namespace servesim::sim
