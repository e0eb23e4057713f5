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

}  // namespace servesim::core
