#pragma once
// Batch schedulers: the per-replica policy that forms each iteration. The interface is
// sim::BatchScheduler (sim/cluster/replica.h); implementations sit beside this header and register
// in scheduler_registry().

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/cluster/replica.h"
#include "sim/core/params.h"

namespace servesim::policies {

// What a scheduler may need to know of the deployment when it is built.
struct SchedulerContext {
  int64_t max_context = 0;  // the model's context window, tokens
  // Attention data-parallel ranks of the replica (expert parallelism): each rank schedules its own
  // requests, so a scheduler's per-iteration limits (sequences, tokens) hold per rank and the
  // replica's are that many times larger.
  int64_t data_parallel = 1;
  // Fair sharing's weight of each tenant (Request::tenant; core::tenant_weights of the workload's
  // classes); empty: every tenant 1.
  std::vector<double> tenant_weights;
  // State the schedulers of one cluster share (fair_scope = "cluster": one set of tenant
  // counters), made by the first scheduler that needs it; every scheduler built from this context
  // (or a copy) sees the same.
  struct Shared {
    std::shared_ptr<std::vector<double>> fair_counters;
  };
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
};

// Family "schedulers".
using SchedulerRegistry = core::Registry<sim::BatchScheduler, const SchedulerContext&>;
SchedulerRegistry& scheduler_registry();

}  // namespace servesim::policies
