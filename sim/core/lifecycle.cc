#include "sim/core/lifecycle.h"

namespace servesim::core {

std::string_view outcome_name(RequestOutcome outcome) {
  switch (outcome) {
    case RequestOutcome::kCompleted: return "completed";
    case RequestOutcome::kRejectedContext: return "rejected_context";
    case RequestOutcome::kRejectedKvCapacity: return "rejected_kv_capacity";
    case RequestOutcome::kTimedOut: return "timed_out";
    case RequestOutcome::kFailed: return "failed";
    case RequestOutcome::kRejectedAdmission: return "rejected_admission";
  }
  return "unknown";
}

std::string_view fleet_event_name(FleetEventKind kind) {
  switch (kind) {
    case FleetEventKind::kReplicaDown: return "replica_down";
    case FleetEventKind::kReplicaUp: return "replica_up";
    case FleetEventKind::kReplicaSpeed: return "replica_speed";
    case FleetEventKind::kRequestRerouted: return "request_rerouted";
    case FleetEventKind::kRequestRetried: return "request_retried";
    case FleetEventKind::kReplicaProvision: return "replica_provision";
    case FleetEventKind::kReplicaReady: return "replica_ready";
    case FleetEventKind::kReplicaDrain: return "replica_drain";
    case FleetEventKind::kReplicaOff: return "replica_off";
    case FleetEventKind::kLinkDown: return "link_down";
    case FleetEventKind::kLinkUp: return "link_up";
    case FleetEventKind::kLinkSpeed: return "link_speed";
  }
  return "unknown";
}

void LifecycleObserver::on_decode_steps(const IterationRecord& base, const ReplicaState& state,
                                        std::span<const DecodeStep> steps) {
  IterationRecord it = base;
  ReplicaState st = state;
  for (const DecodeStep& step : steps) {
    it.start = step.start;
    it.duration = step.duration;
    it.flops = step.flops;
    it.bytes = step.bytes;
    it.peak_flop_seconds = step.peak_flop_seconds;
    on_iteration(it);
    if (step.kv_blocks_used >= 0) {
      st.time = step.start;
      st.kv_blocks_used = step.kv_blocks_used;
      on_replica_state(st);
    }
    if (step.emits) {
      const GapRun gap{step.duration.ns(), base.decode_tokens, 1};
      on_token_gaps(std::span<const GapRun>(&gap, 1));
    }
  }
}

}  // namespace servesim::core
