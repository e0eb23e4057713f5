#pragma once
// Steps the batch schedulers share: decoding the running set with vLLM's preemption rule, and
// admitting waiting requests whose KV is already computed (transferred from a prefill replica, or
// swapped out earlier).

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/cluster/replica.h"

namespace servesim::policies {

// Every decoding request in the running set gets one more token, oldest first, up to `max_tokens`
// tokens. Each takes a new block when it crosses a block boundary; when none is available the
// newest running request is preempted (and a request that is itself the newest preempts itself).
// A request with draft tokens (speculative decoding) verifies them in the same step: they count
// towards `max_tokens` (those that do not fit are dropped) and take KV blocks too.
// Returns true when something was preempted.
bool decode_running(sim::Replica& replica, sim::IterationPlan& plan,
                    int64_t max_tokens = std::numeric_limits<int64_t>::max());

// decode_running under priority scheduling (vLLM's scheduling_policy = "priority"): the decoding
// requests in order of (priority, id), lower first; when a block runs out, the running request of
// the lowest priority (largest value), newest among equals, is preempted, which is the request
// itself when none below it is left. `order` is a buffer the caller keeps between iterations.
bool decode_running_by_priority(sim::Replica& replica, sim::IterationPlan& plan, int64_t max_tokens,
                                std::vector<sim::RequestId>& order);

// Whether request `a` comes before `b` under priority scheduling: (priority, id), lower first.
inline bool priority_before(const sim::Request& a, const sim::Request& b) {
  return a.priority != b.priority ? a.priority < b.priority : a.id < b.id;
}

// Admits resumable requests from the head of the waiting queue into this iteration's decodes
// while the running set stays within `max_num_seqs`, the plan within `max_tokens` tokens, and
// `reserved` blocks stay available. Returns the number admitted.
int64_t admit_resumable(sim::Replica& replica, sim::IterationPlan& plan, int64_t max_num_seqs,
                        int64_t reserved, int64_t max_tokens = std::numeric_limits<int64_t>::max());

}  // namespace servesim::policies
