#include "policies/scheduler/batch_scheduler.h"

namespace servesim::policies {

SchedulerRegistry& scheduler_registry() {
  static SchedulerRegistry registry("schedulers", "per-replica policies that form each iteration's batch");
  return registry;
}

}  // namespace servesim::policies
