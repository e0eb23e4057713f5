#include "sim/core/lifecycle.h"

namespace servesim::core {

std::string_view outcome_name(RequestOutcome outcome) {
  switch (outcome) {
    case RequestOutcome::kCompleted: return "completed";
    case RequestOutcome::kRejectedContext: return "rejected_context";
    case RequestOutcome::kRejectedKvCapacity: return "rejected_kv_capacity";
    case RequestOutcome::kTimedOut: return "timed_out";
  }
  return "unknown";
}

}  // namespace servesim::core
