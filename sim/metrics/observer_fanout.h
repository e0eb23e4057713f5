#pragma once
// Hands every lifecycle signal to several observers in a fixed order (the metrics collector first,
// then, for example, the --timeline recorder). The cluster talks to one observer; this keeps it so.
// Every virtual of core::LifecycleObserver is forwarded: a signal added there must be added here,
// or the extra observers would silently miss it.

#include <utility>
#include <vector>

#include "sim/core/lifecycle.h"

namespace servesim::metrics {

class ObserverFanout final : public core::LifecycleObserver {
 public:
  explicit ObserverFanout(std::vector<core::LifecycleObserver*> observers) : observers_(std::move(observers)) {}

  void on_arrival(uint64_t id, core::Time t) override {
    for (auto* o : observers_) o->on_arrival(id, t);
  }
  void on_request_done(const core::RequestRecord& record) override {
    for (auto* o : observers_) o->on_request_done(record);
  }
  void on_preempt(uint64_t id, uint32_t replica, core::Time t) override {
    for (auto* o : observers_) o->on_preempt(id, replica, t);
  }
  void on_iteration(const core::IterationRecord& it) override {
    for (auto* o : observers_) o->on_iteration(it);
  }
  void on_token_gaps(std::span<const core::GapRun> runs) override {
    for (auto* o : observers_) o->on_token_gaps(runs);
  }
  void on_replica_state(const core::ReplicaState& state) override {
    for (auto* o : observers_) o->on_replica_state(state);
  }
  void on_decode_steps(const core::IterationRecord& base, const core::ReplicaState& state,
                       std::span<const core::DecodeStep> steps) override {
    for (auto* o : observers_) o->on_decode_steps(base, state, steps);
  }
  void on_prefix_lookup(const core::PrefixLookup& lookup) override {
    for (auto* o : observers_) o->on_prefix_lookup(lookup);
  }
  void on_kv_transfer(const core::KvTransfer& transfer) override {
    for (auto* o : observers_) o->on_kv_transfer(transfer);
  }
  void on_fleet_event(const core::FleetEvent& event) override {
    for (auto* o : observers_) o->on_fleet_event(event);
  }

 private:
  std::vector<core::LifecycleObserver*> observers_;
};

}  // namespace servesim::metrics
