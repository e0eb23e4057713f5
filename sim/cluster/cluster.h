#pragma once
// The cluster: replicas, the request table, and the arrival path (workload -> router -> replica).

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sim/cluster/replica.h"
#include "sim/cluster/request.h"
#include "sim/core/lifecycle.h"
#include "sim/engine/simulation.h"
#include "traces/arrival_source.h"

namespace servesim::sim {

// The global policy that picks a replica for each arriving request (implementations in
// policies/router/).
class Router {
 public:
  virtual ~Router() = default;
  // Returns an index into `replicas`.
  virtual uint32_t route(const Request& request, std::span<const ReplicaLoad> replicas) = 0;
};

struct ClusterCounters {
  uint64_t arrived = 0;
  uint64_t completed = 0;
  uint64_t rejected = 0;
  uint64_t preemptions = 0;
};

class Cluster final : public EventHandler, private core::LifecycleObserver {
 public:
  // `observer` receives every lifecycle signal of the cluster and its replicas.
  Cluster(Simulation& sim, traces::ArrivalSource& source, std::unique_ptr<Router> router,
          core::LifecycleObserver& observer, size_t num_replicas);

  // Adds replica number `replicas().size()`; call exactly `num_replicas` times before start().
  Replica& add_replica(const ReplicaConfig& config, const hwmodels::StepCostModel& cost,
                       std::unique_ptr<BatchScheduler> scheduler);

  // Schedules the first arrival.
  void start();
  // Arrival of the request read ahead from the source.
  void on_event(uint64_t payload) override;

  const std::vector<std::unique_ptr<Replica>>& replicas() const { return replicas_; }
  std::span<const ReplicaLoad> loads() const { return loads_; }
  const ClusterCounters& counters() const { return counters_; }
  size_t in_flight() const { return requests_.live(); }

  // Throws core::Error unless every arrived request has completed or been rejected and all KV
  // blocks are back: call after the simulation ends.
  void check_drained() const;

 private:
  bool read_next();
  // LifecycleObserver: counts, then forwards to the user's observer.
  void on_arrival(uint64_t id, core::Time t) override { observer_.on_arrival(id, t); }
  void on_request_done(const core::RequestRecord& r) override;
  void on_preempt(uint64_t id, uint32_t replica, core::Time t) override;
  void on_iteration(const core::IterationRecord& it) override { observer_.on_iteration(it); }
  void on_token_gaps(std::span<const int64_t> gaps) override { observer_.on_token_gaps(gaps); }
  void on_replica_state(const core::ReplicaState& s) override { observer_.on_replica_state(s); }

  Simulation& sim_;
  traces::ArrivalSource& source_;
  std::unique_ptr<Router> router_;
  core::LifecycleObserver& observer_;
  RequestTable requests_;
  std::vector<ReplicaLoad> loads_;  // sized once: replicas hold references into it
  std::vector<std::unique_ptr<Replica>> replicas_;
  traces::RequestSpec next_;
  bool has_next_ = false;
  ClusterCounters counters_;
};

}  // namespace servesim::sim
