#pragma once
// Autoscaling ([autoscaler]; docs/fleet.md "Autoscaling"): the pool of a unified cluster (or each
// autoscaled pool of a disaggregated one, [cluster.prefill.autoscaler] / [cluster.decode.autoscaler])
// holds max_replicas replicas built up front, each in one of four phases:
//   off -> (provision) -> starting -> (cold start over) -> up -> (drain) -> draining -> (empty) -> off
// Off replicas cost nothing and take no traffic; starting ones cost GPU time and take no traffic;
// up ones serve; draining ones take no new requests but finish what they hold (no request is lost or
// moved by a drain), then go off. A policy (sim::Autoscaler, kinds in policies/autoscaler/) is asked
// every interval for the replica count it wants; the mechanism (sim/cluster/autoscaling.cc, part of
// Cluster) clamps it to [min, max], applies the scale-down stabilisation window and the cooldown, and
// provisions or drains replicas. Its evaluations and readiness events are weak: they never stretch
// a run.

#include <cstdint>
#include <span>

#include "sim/cluster/replica.h"
#include "sim/core/time.h"

namespace servesim::sim {

enum class ReplicaPhase : uint8_t { kOff, kStarting, kUp, kDraining };

// What an autoscaler may look at when it is asked: what a real one can observe now (queues,
// batches, KV use of each replica, the phases, arrivals so far), never the future.
struct FleetView {
  core::Time now;
  std::span<const ReplicaLoad> loads;    // every replica of the pool (only its own pool's)
  std::span<const ReplicaPhase> phases;  // per replica
  uint32_t current = 0;                  // starting + up: the count the autoscaler controls
  uint32_t up = 0;                       // up (serving) replicas
  uint64_t arrived = 0;                  // requests arrived since the start
};

// An autoscaling policy (kinds in policies/autoscaler/, family "autoscalers").
class Autoscaler {
 public:
  virtual ~Autoscaler() = default;
  // Once before the first evaluation: the pool's replicas (for their step costs).
  virtual void bind(std::span<Replica* const> /*replicas*/) {}
  // The replica count (starting + up) this policy wants now; the mechanism clamps it to
  // [min_replicas, max_replicas] and applies the stabilisation window and cooldown.
  virtual int64_t desired(const FleetView& view) = 0;
};

// The mechanism's settings (the common keys of [autoscaler]).
struct AutoscalePlan {
  uint32_t initial = 1;       // replicas up at the start (cluster.replicas)
  uint32_t min_replicas = 1;  // >= 1
  uint32_t max_replicas = 1;  // the replicas built (the pool's size)
  core::Duration interval;       // between evaluations (> 0)
  core::Duration stabilization;  // scale down only to the highest count wanted over this window
  core::Duration cooldown;       // at least this long between two scaling actions
  core::Duration cold_start;     // provision -> ready (ColdStart::seconds())
};

// A new replica's cold start: provisioning (a machine or pod and the serving engine's start), the
// weights loaded onto each GPU from where they are kept, CUDA-graph capture and warm-up.
struct ColdStart {
  double provision_s = 0;
  double weight_bytes_per_gpu = 0;  // the replica's shard of the weights on each of its GPUs
  double load_bytes_per_s = 0;      // per GPU, from the weights' source (> 0)
  double warmup_s = 0;
  double load_seconds() const { return weight_bytes_per_gpu / load_bytes_per_s; }
  double seconds() const { return provision_s + load_seconds() + warmup_s; }
};

}  // namespace servesim::sim
