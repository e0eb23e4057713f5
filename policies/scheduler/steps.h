#pragma once
// Steps the batch schedulers share: decoding the running set with vLLM's preemption rule, and
// admitting waiting requests whose KV is already computed (transferred from a prefill replica, or
// swapped out earlier).

#include <cstdint>
#include <limits>

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

// Admits resumable requests from the head of the waiting queue into this iteration's decodes
// while the running set stays within `max_num_seqs`, the plan within `max_tokens` tokens, and
// `reserved` blocks stay available. Returns the number admitted.
int64_t admit_resumable(sim::Replica& replica, sim::IterationPlan& plan, int64_t max_num_seqs,
                        int64_t reserved, int64_t max_tokens = std::numeric_limits<int64_t>::max());

}  // namespace servesim::policies
