#pragma once
// A replica: one copy of the model on a tensor-parallel group of GPUs, with its waiting queue,
// running set and paged KV cache. The replica owns the mechanism (blocks, token bookkeeping,
// iteration timing); a BatchScheduler (a policy, policies/scheduler/) decides what each iteration
// contains. Per-token work is counter updates inside one event per iteration.

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "hwmodels/cost_model.h"
#include "sim/cluster/kv_cache.h"
#include "sim/cluster/request.h"
#include "sim/core/lifecycle.h"
#include "sim/engine/simulation.h"

namespace servesim::sim {

class Replica;

// One prefill chunk of an iteration: `tokens` new tokens of request `id`, whose first
// `request.kv_tokens` tokens are already cached.
struct PlannedPrefill {
  RequestId id;
  int64_t tokens = 0;
};

// What one iteration processes. Buffers are reused from iteration to iteration.
struct IterationPlan {
  std::vector<PlannedPrefill> prefills;
  std::vector<RequestId> decodes;
  void clear() {
    prefills.clear();
    decodes.clear();
  }
  bool empty() const { return prefills.empty() && decodes.empty(); }
};

// The policy that forms iterations (implementations in policies/scheduler/).
class BatchScheduler {
 public:
  virtual ~BatchScheduler() = default;
  // Fills `plan` with the next iteration's work, admitting waiting requests (Replica::admit_front),
  // growing running ones (Replica::reserve) and preempting (Replica::preempt) as the policy says.
  // Leaves the plan empty when there is nothing to run.
  virtual void plan(Replica& replica, IterationPlan& plan) = 0;
  // Blocks the policy keeps free when admitting (vLLM's watermark); a request that needs more than
  // total - reserved blocks can never run and is rejected on arrival.
  virtual int64_t reserved_blocks(const KvBlockManager& /*kv*/) const { return 0; }
};

// What routers see of a replica; kept current by the replica.
struct ReplicaLoad {
  int64_t outstanding_tokens = 0;  // prompt tokens not yet prefilled + output tokens not yet emitted
  int64_t queued = 0;
  int64_t running = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_total = 0;
};

struct ReplicaConfig {
  uint32_t index = 0;
  int64_t kv_blocks = 0;     // capacity of the paged KV cache
  int64_t block_size = 16;   // tokens per block
  int64_t max_context = 0;   // the model's context window (prompt + output)
};

class Replica final : public EventHandler {
 public:
  Replica(const ReplicaConfig& config, Simulation& sim, RequestTable& requests,
          const hwmodels::StepCostModel& cost, std::unique_ptr<BatchScheduler> scheduler,
          core::LifecycleObserver& observer, ReplicaLoad& load);

  uint32_t index() const { return index_; }

  // ---- cluster side ----
  // Why this replica can never serve `r` (too long for the context or for the KV cache), if so.
  std::optional<core::RequestOutcome> rejection(const Request& r) const;
  // Takes a routed request into the waiting queue and starts an iteration if idle.
  void enqueue(RequestId id);
  bool idle() const { return !busy_ && waiting_.empty() && running_.empty(); }

  // ---- scheduler side: the mechanism policies use ----
  const std::deque<RequestId>& waiting() const { return waiting_; }
  const std::vector<RequestId>& running() const { return running_; }  // in arrival order
  Request& request(RequestId id) { return requests_[id]; }
  const KvBlockManager& kv() const { return kv_; }
  // Moves the head of the waiting queue into the running set, taking blocks for `kv_tokens` cached
  // tokens; false (and nothing changes) when the blocks are not free.
  bool admit_front(int64_t kv_tokens);
  // Takes the blocks needed for request `id` to hold `kv_tokens` tokens; false when not free.
  bool reserve(RequestId id, int64_t kv_tokens);
  // Preemption by recompute: frees the request's blocks and puts it at the front of the waiting
  // queue; its prompt and generated tokens are prefilled again when it is readmitted.
  void preempt(RequestId id);

  // Iteration completion.
  void on_event(uint64_t payload) override;

 private:
  void try_start_iteration();
  void emit_token(Request& r, core::Time now);
  void publish_state();

  uint32_t index_;
  int64_t max_context_;
  Simulation& sim_;
  RequestTable& requests_;
  const hwmodels::StepCostModel& cost_;
  std::unique_ptr<BatchScheduler> scheduler_;
  core::LifecycleObserver& observer_;
  ReplicaLoad& load_;
  KvBlockManager kv_;

  std::deque<RequestId> waiting_;
  std::vector<RequestId> running_;
  IterationPlan plan_;
  std::vector<int64_t> gaps_;
  bool busy_ = false;
  uint64_t iteration_ = 0;
};

}  // namespace servesim::sim
