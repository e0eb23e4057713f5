#include "policies/scheduler/steps.h"

#include <algorithm>

namespace servesim::policies {

namespace {

// The loop of decode_running; kSpeculative = false compiles the drafts away (the replica has no
// speculative decoding, so every request's drafts are 0).
template <bool kSpeculative>
bool decode_running_loop(sim::Replica& replica, sim::IterationPlan& plan, int64_t max_tokens) {
  bool preempted = false;
  size_t i = 0;
  int64_t tokens = 0;
  while (i < replica.running().size() && tokens < max_tokens) {
    const sim::RequestId id = replica.running()[i];
    const sim::Request& r = replica.request(id);
    if (!r.decoding) {  // still prefilling (chunked): not a decode
      ++i;
      continue;
    }
    const int64_t need = r.kv_tokens + 1;
    // With speculative decoding the decode verifies its drafts too: they count in the budget (as
    // vLLM V1 does, dropping the drafts that do not fit it) and take KV until they are judged.
    int64_t drafts = 0;
    if constexpr (kSpeculative) drafts = r.drafts > 0 ? std::min(r.drafts, max_tokens - tokens - 1) : 0;
    bool self_preempted = false;
    while (!replica.reserve(id, need, drafts)) {
      preempted = true;
      if (replica.running().size() - 1 > i) {
        replica.preempt(replica.running().back());
      } else {
        replica.preempt(id);
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    plan.add_decode(id, need, drafts);
    tokens += 1 + drafts;
    ++i;
  }
  return preempted;
}

}  // namespace

bool decode_running(sim::Replica& replica, sim::IterationPlan& plan, int64_t max_tokens) {
  return replica.speculating() ? decode_running_loop<true>(replica, plan, max_tokens)
                               : decode_running_loop<false>(replica, plan, max_tokens);
}

bool decode_running_by_priority(sim::Replica& replica, sim::IterationPlan& plan, int64_t max_tokens,
                                std::vector<sim::RequestId>& order) {
  order.assign(replica.running().begin(), replica.running().end());
  std::stable_sort(order.begin(), order.end(), [&](sim::RequestId a, sim::RequestId b) {
    return priority_before(replica.request(a), replica.request(b));
  });
  bool preempted = false;
  size_t end = order.size();  // order[end..] have been preempted
  int64_t tokens = 0;
  for (size_t i = 0; i < end && tokens < max_tokens; ++i) {
    const sim::RequestId id = order[i];
    const sim::Request& r = replica.request(id);
    if (!r.decoding) continue;  // still prefilling (chunked): not a decode
    const int64_t need = r.kv_tokens + 1;
    const int64_t drafts = r.drafts > 0 ? std::min(r.drafts, max_tokens - tokens - 1) : 0;
    bool self_preempted = false;
    while (!replica.reserve(id, need, drafts)) {
      preempted = true;
      // The lowest priority left is the last of the order not yet preempted; the requests before i
      // are of higher priority and already in the plan.
      --end;
      replica.preempt(order[end]);
      if (end == i) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    plan.add_decode(id, need, drafts);
    tokens += 1 + drafts;
  }
  return preempted;
}

int64_t admit_resumable(sim::Replica& replica, sim::IterationPlan& plan, int64_t max_num_seqs, int64_t reserved,
                        int64_t max_tokens) {
  int64_t admitted = 0;
  while (!replica.waiting().empty() && max_tokens > 0) {
    const sim::RequestId id = replica.waiting().front();
    const sim::Request& r = replica.request(id);
    if (!replica.resumable(r)) break;
    if (static_cast<int64_t>(replica.running().size()) >= max_num_seqs) break;
    const int64_t need = r.kv_tokens + 1;
    if (replica.kv().available() - replica.admission_blocks(need) < reserved) break;
    if (!replica.admit_front(need)) break;
    plan.add_decode(id, need);
    ++admitted;
    --max_tokens;
  }
  return admitted;
}

}  // namespace servesim::policies
