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

// Priority preemption to admit a waiting request ([scheduler] priority_preemption = "admit"), as
// vLLM v0's priority policy does (Scheduler._schedule_priority_preemption): the head of the waiting
// queue (already in (priority, arrival) order) is considered alone; while the running request with
// the largest (priority, arrival) has a strictly larger priority value than the head and `fits`
// says the head cannot be admitted now, that request is preempted (Replica::preempt: back into the
// waiting order, its KV dropped or swapped as the cluster says) and the head checked again.
// `fits(head)` is the scheduler's own admission test (KV blocks, sequences, token budget). Returns
// the number preempted; the waiting queue is left in priority order with the head in front.
template <typename Fits>
int64_t preempt_for_waiting_head(sim::Replica& replica, const Fits& fits) {
  if (replica.waiting().empty()) return 0;
  const sim::RequestId head = replica.waiting().front();
  int64_t preempted = 0;
  while (!replica.running().empty()) {
    sim::RequestId worst = replica.running().front();
    for (sim::RequestId v : replica.running())
      if (priority_before(replica.request(worst), replica.request(v))) worst = v;
    if (replica.request(worst).priority <= replica.request(head).priority || fits(head)) break;
    replica.preempt(worst);
    replica.order_waiting_by_priority();  // the victim (a lower class) goes behind the head
    ++preempted;
  }
  return preempted;
}

// Admits resumable requests from the head of the waiting queue into this iteration's decodes
// while the running set stays within `max_num_seqs`, the plan within `max_tokens` tokens, and
// `reserved` blocks stay available. Returns the number admitted.
int64_t admit_resumable(sim::Replica& replica, sim::IterationPlan& plan, int64_t max_num_seqs,
                        int64_t reserved, int64_t max_tokens = std::numeric_limits<int64_t>::max());

}  // namespace servesim::policies
