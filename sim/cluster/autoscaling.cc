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

void Cluster::set_autoscaler(std::unique_ptr<Autoscaler> policy, const AutoscalePlan& plan) {
  if (!policy) return;
  if (disaggregated()) throw core::Error("internal: autoscaling is modelled for unified clusters only");
  if (plan.max_replicas != layout_.replicas || plan.min_replicas < 1 || plan.min_replicas > plan.max_replicas ||
      plan.initial < plan.min_replicas || plan.initial > plan.max_replicas || plan.interval.ns() <= 0 ||
      plan.cold_start.ns() < 0 || plan.stabilization.ns() < 0 || plan.cooldown.ns() < 0)
    throw core::Error("internal: an autoscaling plan out of range");
  autoscaler_ = std::move(policy);
  scale_ = plan;
}

void Cluster::start_autoscaling() {
  std::vector<Replica*> all;
  for (auto& r : replicas_) all.push_back(r.get());
  autoscaler_->bind(all);
  phases_.assign(replicas_.size(), ReplicaPhase::kUp);
  phase_generation_.assign(replicas_.size(), 0);
  ready_at_.assign(replicas_.size(), core::Time());
  provisioned_ = static_cast<uint32_t>(replicas_.size());
  for (uint32_t i = scale_.initial; i < replicas_.size(); ++i) set_phase(i, ReplicaPhase::kOff, core::FleetEventKind::kReplicaOff);
  // The initial count was wanted from the start: no scale-down before a whole window has passed.
  wanted_.emplace_back(sim_.now(), scale_.initial);
  sim_.schedule_weak_at(sim_.now() + scale_.interval, &scale_timer_, 0);
}

void Cluster::set_phase(uint32_t i, ReplicaPhase phase, core::FleetEventKind kind) {
  const bool was_provisioned = phases_[i] != ReplicaPhase::kOff;
  const bool provisioned = phase != ReplicaPhase::kOff;
  provisioned_ = provisioned_ + (provisioned ? 1u : 0u) - (was_provisioned ? 1u : 0u);
  phases_[i] = phase;
  loads_[i].up = phase == ReplicaPhase::kUp;
  fleet_event(kind, i, 0, static_cast<double>(provisioned_));
}

void Cluster::on_scale_timer(uint64_t payload) {
  if (payload == 0) {
    evaluate_autoscaler();
    // Evaluations at whole multiples of the interval from the start (no drift); weak, so they end
    // with the run.
    ++evaluations_;
    int64_t next = 0;
    if (!__builtin_mul_overflow(static_cast<int64_t>(evaluations_ + 1), scale_.interval.ns(), &next))
      sim_.schedule_weak_at(core::Time::from_ns(next), &scale_timer_, 0);
    return;
  }
  const uint32_t i = static_cast<uint32_t>((payload & 0xffffffffu) - 1);
  const uint32_t generation = static_cast<uint32_t>(payload >> 32);
  // Stale: the start was called off (and perhaps the replica provisioned again since).
  if (phases_[i] != ReplicaPhase::kStarting || phase_generation_[i] != generation) return;
  set_phase(i, ReplicaPhase::kUp, core::FleetEventKind::kReplicaReady);
  // Requests parked while failures left no replica up go to it.
  if (!parked_.empty()) unpark();
}

std::optional<core::Time> Cluster::next_scale_up() const {
  std::optional<core::Time> first;
  bool provisionable = false;
  for (uint32_t i = 0; i < replicas_.size(); ++i) {
    if (phases_[i] == ReplicaPhase::kStarting && (!first || ready_at_[i] < *first)) first = ready_at_[i];
    provisionable = provisionable || (phases_[i] == ReplicaPhase::kOff && !replicas_[i]->down());
  }
  if (first || !provisionable) return first;
  // The next evaluation (whole multiples of the interval from the start) can provision it.
  int64_t next = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(evaluations_ + 1), scale_.interval.ns(), &next)) return std::nullopt;
  return core::Time::from_ns(next);
}

void Cluster::evaluate_autoscaler() {
  // A draining replica whose last request left without a departure signal (its client gave up on
  // the way) is empty by now.
  for (uint32_t i = 0; i < replicas_.size(); ++i)
    if (phases_[i] == ReplicaPhase::kDraining) switch_off_if_empty(i);
  FleetView view;
  view.now = sim_.now();
  view.loads = loads_;
  view.phases = phases_;
  for (ReplicaPhase p : phases_) {
    view.current += p == ReplicaPhase::kStarting || p == ReplicaPhase::kUp;
    view.up += p == ReplicaPhase::kUp;
  }
  view.arrived = counters_.arrived;
  const int64_t raw = autoscaler_->desired(view);
  const uint32_t wanted = static_cast<uint32_t>(
      std::clamp<int64_t>(raw, scale_.min_replicas, scale_.max_replicas));
  // The stabilisation window: the counts wanted over [now - window, now].
  wanted_.emplace_back(sim_.now(), wanted);
  while (!wanted_.empty() && wanted_.front().first + scale_.stabilization < sim_.now()) wanted_.pop_front();
  uint32_t target = wanted;
  if (wanted < view.current) {
    // Scale down only as far as the highest count wanted over the whole window (Kubernetes HPA's
    // downscale stabilisation).
    for (const auto& w : wanted_) target = std::max(target, w.second);
    target = std::min(target, view.current);
  }
  if (target == view.current) return;
  if (last_scaling_ && sim_.now() < *last_scaling_ + scale_.cooldown) return;
  last_scaling_ = sim_.now();
  scale_to(target);
}

void Cluster::scale_to(uint32_t target) {
  const uint32_t n = static_cast<uint32_t>(replicas_.size());
  uint32_t current = 0;
  for (ReplicaPhase p : phases_) current += p == ReplicaPhase::kStarting || p == ReplicaPhase::kUp;
  while (current < target) {
    // A draining replica is still loaded and warm: calling its drain off is immediate.
    uint32_t pick = n;
    for (uint32_t i = 0; i < n && pick == n; ++i)
      if (phases_[i] == ReplicaPhase::kDraining) pick = i;
    if (pick < n) {
      set_phase(pick, ReplicaPhase::kUp, core::FleetEventKind::kReplicaReady);
      if (!parked_.empty()) unpark();
    } else {
      // A failed replica ([faults]) cannot be provisioned until its repair.
      for (uint32_t i = 0; i < n && pick == n; ++i)
        if (phases_[i] == ReplicaPhase::kOff && !replicas_[i]->down()) pick = i;
      if (pick == n) return;  // every replica is in service or down
      ++phase_generation_[pick];
      set_phase(pick, ReplicaPhase::kStarting, core::FleetEventKind::kReplicaProvision);
      const uint64_t payload = (uint64_t{phase_generation_[pick]} << 32) | (pick + 1u);
      ready_at_[pick] = sim_.now() + scale_.cold_start;
      sim_.schedule_weak_at(ready_at_[pick], &scale_timer_, payload);
    }
    ++current;
  }
  while (current > target) {
    // The newest start is called off first (it serves nothing yet), then the highest-numbered
    // replica up drains. target >= min_replicas >= 1 keeps one replica up.
    uint32_t pick = n;
    for (uint32_t i = n; i-- > 0 && pick == n;)
      if (phases_[i] == ReplicaPhase::kStarting) pick = i;
    if (pick < n) {
      set_phase(pick, ReplicaPhase::kOff, core::FleetEventKind::kReplicaOff);
    } else {
      for (uint32_t i = n; i-- > 0 && pick == n;)
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
  // Empty: nothing on the way to it (queued counts requests still on the client path), waiting,
  // running or in an iteration.
  if (l.queued != 0 || l.running != 0 || !replicas_[i]->idle()) return;
  set_phase(i, ReplicaPhase::kOff, core::FleetEventKind::kReplicaOff);
}

}  // namespace servesim::sim
